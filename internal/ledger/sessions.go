package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
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
	o := &sessionOpen{ctx: ctx, idempotencyKey: idempotencyKey, sess: sess, source: source}
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

// sessionOpener opens the sessions of one client that are asked for
// together in one transaction, and so one commit. Opens of a client follow
// one another on its row's lock, held until the commit is durable: one
// commit for many is what lets a client open more than about a thousand a
// second.
//
// The first open of a client runs alone, in its caller, as one statement.
// Opens of the client that come while it runs wait, and then go together
// (at most maxOpenBatch, one per idempotency key), and so on until none
// wait. An open whose context ends while it waits is dropped, untouched.
type sessionOpener struct {
	store *Store

	mu      sync.Mutex
	waiting map[string][]*sessionOpen // by client, present while one of its opens runs
}

const maxOpenBatch = 64

// sessionOpen is one session to open, and then what the ledger did.
type sessionOpen struct {
	ctx            context.Context // bounded: it has a deadline
	idempotencyKey string
	sess           Session
	source         string

	charged bool // opened, and a credit taken
	usable  bool // its API key was usable (or it had none)
	err     error
	done    chan struct{}
}

// open opens o, alone or with the opens of its client that wait beside it.
func (m *sessionOpener) open(o *sessionOpen) error {
	client := o.sess.ClientID
	m.mu.Lock()
	if q, busy := m.waiting[client]; busy {
		o.done = make(chan struct{})
		m.waiting[client] = append(q, o)
		m.mu.Unlock()
		select {
		case <-o.done:
			return o.err
		case <-o.ctx.Done():
			return o.ctx.Err()
		}
	}
	m.waiting[client] = nil
	m.mu.Unlock()
	o.err = m.store.openOne(o)
	m.next(client)
	return o.err
}

// openOne opens o alone, in one statement, and says whether it charged a
// credit and whether o's API key was usable.
func (s *Store) openOne(o *sessionOpen) error {
	var apiKey []byte // NULL: opened by no key (tests, tools)
	if o.sess.Key != (credential.KeyHash{}) {
		apiKey = o.sess.Key[:]
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
		sess.ID, sess.ClientID, o.idempotencyKey, sess.IssuedAt, sess.ExpiresAt, sess.TokenKeyID, apiKey, o.source).Scan(&o.charged, &o.usable)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "sessions_client_id_idempotency_key_key" {
		// unique_violation: opened under this key by a concurrent call,
		// which OpenSession then replays.
		o.charged, o.usable = false, true
		return nil
	}
	return err
}

// next opens, in a goroutine, the opens of client that wait, if any.
func (m *sessionOpener) next(client string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var batch, rest []*sessionOpen
	for _, o := range m.waiting[client] {
		switch {
		case o.ctx.Err() != nil:
			o.err = o.ctx.Err()
			close(o.done)
		case len(batch) == maxOpenBatch || hasKey(batch, o.idempotencyKey):
			rest = append(rest, o)
		default:
			batch = append(batch, o)
		}
	}
	if len(batch) == 0 {
		delete(m.waiting, client)
		return
	}
	m.waiting[client] = rest
	go func() {
		m.store.openBatch(client, batch)
		for _, o := range batch {
			close(o.done)
		}
		m.next(client)
	}()
}

// hasKey reports whether batch opens a session under this idempotency key.
func hasKey(batch []*sessionOpen, key string) bool {
	for _, o := range batch {
		if o.idempotencyKey == key {
			return true
		}
	}
	return false
}

// openBatch opens the sessions of batch, all of client, in one transaction
// sent at once: it takes the client's row first, so that what follows sees
// every session and credit of the client as they stand, and no other open
// changes them before the commit. Credits go in the batch's order.
//
// The transaction's lock_timeout ends a wait for the row a quarter of the
// time before the first of the callers gives up, as Open's does for one
// statement: the transaction cannot commit after its caller answered 503.
func (s *Store) openBatch(client string, batch []*sessionOpen) {
	deadline, _ := batch[0].ctx.Deadline()
	for _, o := range batch[1:] {
		if d, _ := o.ctx.Deadline(); d.Before(deadline) {
			deadline = d
		}
	}
	lockTimeout := time.Until(deadline) * 3 / 4
	if lockTimeout < time.Millisecond {
		for _, o := range batch {
			o.err = context.DeadlineExceeded
		}
		return
	}
	n := len(batch)
	ctx, span := startBatch(s, "ledger.session_batch", batch, func(o *sessionOpen) context.Context { return o.ctx })
	defer span.End()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	var (
		ids, idempotencyKeys, tokenKeys, sources = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		issued, expires                          = make([]time.Time, n), make([]time.Time, n)
		apiKeys                                  = make([][]byte, n) // nil: opened by no key
	)
	for i, o := range batch {
		ids[i], idempotencyKeys[i], tokenKeys[i], sources[i] = o.sess.ID, o.idempotencyKey, o.sess.TokenKeyID, o.source
		issued[i], expires[i] = o.sess.IssuedAt, o.sess.ExpiresAt
		if o.sess.Key != (credential.KeyHash{}) {
			apiKeys[i] = o.sess.Key[:]
		}
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('lock_timeout', $1, true)`, strconv.FormatInt(lockTimeout.Milliseconds(), 10))
	// NO KEY: the lock an UPDATE of the row takes; it leaves the foreign
	// keys of other rows (metrics records) free to check the client.
	b.Queue(`SELECT FROM clients WHERE client_id = $1 FOR NO KEY UPDATE`, client)
	// usable and its FOR SHARE are OpenSession's: see there.
	b.Queue(`
		WITH input AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::bytea[], $7::text[])
				WITH ORDINALITY AS t(id, idempotency_key, issued_at, expires_at, token_key_id, key_sha256, source, i)
		), usable AS (
			SELECT input.i FROM input JOIN api_keys k ON k.key_sha256 = input.key_sha256
			WHERE k.revoked_at IS NULL OR k.usable_until > input.issued_at
			FOR SHARE OF k
		), wanted AS (
			SELECT input.*, row_number() OVER (ORDER BY input.i) AS n FROM input
			WHERE (input.key_sha256 IS NULL OR input.i IN (SELECT i FROM usable))
			  AND NOT EXISTS (SELECT FROM sessions s WHERE s.client_id = $8 AND s.idempotency_key = input.idempotency_key)
		), opened AS (
			INSERT INTO sessions (id, client_id, idempotency_key, issued_at, expires_at, token_key_id, key_sha256)
			SELECT w.id, c.client_id, w.idempotency_key, w.issued_at, w.expires_at, w.token_key_id, w.key_sha256
			FROM wanted w JOIN clients c ON c.client_id = $8
			WHERE w.n <= c.allocated_hours - c.consumed_hours
			RETURNING id
		), charge AS (
			UPDATE clients SET consumed_hours = consumed_hours + (SELECT count(*) FROM opened)
			WHERE client_id = $8 AND EXISTS (SELECT FROM opened)
		), event AS (
			INSERT INTO credit_events (client_id, at, kind, consumed_delta, session_id, source)
			SELECT $8, w.issued_at, 'session', 1, w.id, w.source FROM wanted w WHERE w.id IN (SELECT id FROM opened)
		)
		SELECT i, id IN (SELECT id FROM opened), key_sha256 IS NULL OR i IN (SELECT i FROM usable) FROM input`,
		ids, idempotencyKeys, issued, expires, tokenKeys, apiKeys, sources, client,
	).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				i               int
				charged, usable bool
			)
			if err := rows.Scan(&i, &charged, &usable); err != nil {
				return err
			}
			batch[i-1].charged, batch[i-1].usable = charged, usable
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		for _, o := range batch {
			o.charged, o.usable, o.err = false, false, err
		}
	}
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
