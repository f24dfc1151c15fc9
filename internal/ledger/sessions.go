package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Session is an opened session. Its token is derived, never stored.
type Session struct {
	ID         string
	ClientID   string
	IssuedAt   time.Time
	ExpiresAt  time.Time
	TokenKeyID string // the token key that signs it
}

// OpenSession opens s for its client under idempotencyKey, consuming one
// credit, in one transaction. When the client already opened a session
// under that key, it returns that session with replay true and consumes
// nothing. With no credit left it returns ErrNoCredit and changes nothing.
//
// Concurrent calls never open more sessions than credits: the credit is
// taken by a conditional UPDATE of the client's row, which PostgreSQL
// serializes; a concurrent call with the same key waits on the unique
// index and then replays.
func (s *Store) OpenSession(ctx context.Context, idempotencyKey string, sess Session, source string) (opened Session, replay bool, err error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			INSERT INTO sessions (id, client_id, idempotency_key, issued_at, expires_at, token_key_id)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (client_id, idempotency_key) DO NOTHING`,
			sess.ID, sess.ClientID, idempotencyKey, sess.IssuedAt, sess.ExpiresAt, sess.TokenKeyID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			replay = true
			opened, err = scanSession(tx.QueryRow(ctx, sessionColumns+`
				WHERE client_id = $1 AND idempotency_key = $2`, sess.ClientID, idempotencyKey))
			return err
		}
		tag, err = tx.Exec(ctx, `
			UPDATE clients SET consumed_hours = consumed_hours + 1
			WHERE client_id = $1 AND consumed_hours < allocated_hours`, sess.ClientID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNoCredit // rolls the session back
		}
		opened = sess
		_, err = tx.Exec(ctx, `
			INSERT INTO credit_events (client_id, at, kind, consumed_delta, session_id, source)
			VALUES ($1, $2, 'session', 1, $3, $4)`, sess.ClientID, sess.IssuedAt, sess.ID, source)
		return err
	})
	if err != nil {
		return Session{}, false, err
	}
	return opened, replay, nil
}

// Session returns the session with this id, or ErrNotFound.
func (s *Store) Session(ctx context.Context, id string) (Session, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	sess, err := scanSession(s.pool.QueryRow(ctx, sessionColumns+` WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Session{}, ErrNotFound
	}
	return sess, err
}

const sessionColumns = `SELECT id, client_id, issued_at, expires_at, token_key_id FROM sessions`

func scanSession(row pgx.Row) (Session, error) {
	var s Session
	err := row.Scan(&s.ID, &s.ClientID, &s.IssuedAt, &s.ExpiresAt, &s.TokenKeyID)
	return s, err
}
