package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/evalmeter/evalmeter/internal/credential"
)

// Session is an opened session. Its token is derived, never stored.
type Session struct {
	ID         string
	ClientID   string
	IssuedAt   time.Time
	ExpiresAt  time.Time
	TokenKeyID string             // the token key that signs it
	Key        credential.KeyHash // the API key that opened it
}

// ErrSessionEnded is a session ended before its window closed, because the
// API key that opened it was revoked (at the end of its grace period, if
// it had one).
var ErrSessionEnded = fmt.Errorf("%w: the session was ended because its API key was revoked", ErrNotFound)

// ErrKeyUnusable is a session refused because its API key was revoked
// after the caller authenticated it.
var ErrKeyUnusable = fmt.Errorf("%w: the API key was revoked", ErrNotFound)

// OpenSession opens s for its client under idempotencyKey, consuming one
// credit, in one statement. When the client already opened a session under
// that key, it returns that session with replay true and consumes nothing.
// With no credit left it returns ErrNoCredit and changes nothing.
//
// Concurrent calls never open more sessions than credits: the credit is
// taken by a conditional UPDATE of the client's row, which PostgreSQL
// serializes. The row stays locked until the commit is durable, so opens of
// one client follow one another: one statement, not a transaction of five
// round trips, keeps the lock for the least time, and the opens that come
// meanwhile go together in the next transaction (sessionOpener). A
// concurrent call with the same key fails on the unique index once the
// first commits, which undoes its credit, and then replays.
//
// A statement commits by itself once it ends, even after its caller has
// given up. The connections' lock_timeout (Open) ends a wait for the row
// before the caller's bound does, so that a call refused for its bound
// while it waited leaves no trace.
func (s *Store) OpenSession(ctx context.Context, idempotencyKey string, sess Session, source string) (opened Session, replay bool, err error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	o := &sessionOpen{ctx: ctx, key: idempotencyKey, sess: sess, source: source}
	if err := s.opens.open(o); err != nil {
		return Session{}, false, err
	}
	if o.charged {
		return sess, false, nil
	}
	opened, err = scanSession(s.pool.QueryRow(ctx, sessionColumns+`
		FROM sessions s WHERE client_id = $1 AND idempotency_key = $2`, sess.ClientID, idempotencyKey))
	switch {
	case err == nil:
		replay = true
	case !errors.Is(err, pgx.ErrNoRows):
		return Session{}, false, err
	case !o.usable:
		return Session{}, false, ErrKeyUnusable
	default:
		err = ErrNoCredit
	}
	// A replay answers with another request's session, a refusal from the
	// credits others spent: neither may answer before the standbys have them.
	if werr := s.awaitStandbys(ctx); werr != nil {
		return Session{}, false, werr
	}
	if err != nil {
		return Session{}, false, err
	}
	return opened, replay, nil
}

// openOne opens o alone, in one statement, and says whether it charged a
// credit and whether o's key was usable.
func (s *Store) openOne(o *sessionOpen) error {
	var key []byte // NULL: opened by no key (tests, tools)
	if o.sess.Key != (credential.KeyHash{}) {
		key = o.sess.Key[:]
	}
	// Only while the key is usable: one revoked since the caller checked
	// it opens nothing and costs nothing. FOR SHARE orders this with a
	// concurrent revocation: either it waits and sees the key revoked, or
	// the revocation waits and ends this session with the key's others.
	sess := o.sess
	err := s.pool.QueryRow(o.ctx, `
		WITH usable AS (
			SELECT FROM api_keys WHERE key_sha256 = $7 AND (revoked_at IS NULL OR usable_until > $4) FOR SHARE
		), charge AS (
			UPDATE clients SET consumed_hours = consumed_hours + 1
			WHERE client_id = $2 AND consumed_hours < allocated_hours
			  AND ($7::bytea IS NULL OR EXISTS (SELECT FROM usable))
			  AND NOT EXISTS (SELECT FROM sessions WHERE client_id = $2 AND idempotency_key = $3)
			RETURNING client_id
		), opened AS (
			INSERT INTO sessions (id, client_id, idempotency_key, issued_at, expires_at, token_key_id, key_sha256)
			SELECT $1, client_id, $3, $4, $5, $6, $7 FROM charge
		), event AS (
			INSERT INTO credit_events (client_id, at, kind, consumed_delta, session_id, source)
			SELECT client_id, $4, 'session', 1, $1, $8 FROM charge
		)
		SELECT EXISTS (SELECT FROM charge), $7::bytea IS NULL OR EXISTS (SELECT FROM usable)`,
		sess.ID, sess.ClientID, o.key, sess.IssuedAt, sess.ExpiresAt, sess.TokenKeyID, key, o.source).Scan(&o.charged, &o.usable)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "sessions_client_id_idempotency_key_key" {
		// unique_violation: opened under this key by a concurrent call,
		// which OpenSession then replays.
		o.charged, o.usable = false, true
		return nil
	}
	return err
}

// Session returns the session with this id: ErrNotFound when there is
// none, ErrSessionEnded when it ended because its key was revoked (at the
// end of the key's grace period, if it had one, by now).
//
// The key's revocation is read too, not only the session's ended_at: the
// sessions of a key in its grace period end with it.
func (s *Store) Session(ctx context.Context, id string, now time.Time) (Session, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var ended bool
	sess, err := scanSession(s.pool.QueryRow(ctx, sessionColumns+`,
		s.ended_at IS NOT NULL OR k.revoked_at IS NOT NULL AND coalesce(k.usable_until, '-infinity') <= $2
		FROM sessions s LEFT JOIN api_keys k USING (key_sha256) WHERE s.id = $1`, id, now), &ended)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Session{}, ErrNotFound
	case err == nil && ended:
		return Session{}, ErrSessionEnded
	}
	return sess, err
}

const sessionColumns = `SELECT s.id, s.client_id, s.issued_at, s.expires_at, s.token_key_id, coalesce(s.key_sha256, '')`

func scanSession(row pgx.Row, more ...any) (Session, error) {
	var s Session
	var key []byte
	err := row.Scan(append([]any{&s.ID, &s.ClientID, &s.IssuedAt, &s.ExpiresAt, &s.TokenKeyID, &key}, more...)...)
	copy(s.Key[:], key)
	return s, err
}
