package ledger

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalmeter/evalmeter/internal/credential"
)

// Grant is a client's allocation as an operator sets it.
type Grant struct {
	ClientID       string
	AllocatedHours int
	ValidUntil     *time.Time // nil: no end
	Source         string     // who provisions it, for the credit events
}

// clientIDPattern is the ClientAgreement's clientID rule (DESIGN.md §6).
var clientIDPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate checks a grant before it reaches the database.
func (g Grant) Validate() error {
	if !clientIDPattern.MatchString(g.ClientID) {
		return fmt.Errorf("%w client id %q: use 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit", ErrInvalid, g.ClientID)
	}
	if g.AllocatedHours < 0 {
		return fmt.Errorf("%w allocated hours %d: must be 0 or more", ErrInvalid, g.AllocatedHours)
	}
	return nil
}

// Client is a client as the API sees it.
type Client struct {
	ID             string
	AllocatedHours int
	ConsumedHours  int
	ValidUntil     *time.Time
}

// Expired reports whether the client's agreement has ended at now.
func (c Client) Expired(now time.Time) bool {
	return c.ValidUntil != nil && !now.Before(*c.ValidUntil)
}

// Usage is the figures of GET /api/svc/v1/usage (spec §2.4).
type Usage struct {
	ClientID       string
	AllocatedHours int
	ConsumedHours  int
	RemainingHours int // never negative, even after an allocation is lowered
	ActiveSessions int
}

// UpsertClient creates the client or updates its allocation and validity,
// recording a credit event when the allocation changes. It reports whether
// the client was created.
func (s *Store) UpsertClient(ctx context.Context, g Grant, now time.Time) (created bool, err error) {
	if err := g.Validate(); err != nil {
		return false, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var before int
		err := tx.QueryRow(ctx, `SELECT allocated_hours FROM clients WHERE client_id = $1 FOR UPDATE`, g.ClientID).Scan(&before)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			created = true
			_, err = tx.Exec(ctx, `
				INSERT INTO clients (client_id, allocated_hours, valid_until, source, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $5)`, g.ClientID, g.AllocatedHours, g.ValidUntil, g.Source, now)
		case err == nil:
			_, err = tx.Exec(ctx, `
				UPDATE clients SET allocated_hours = $2, valid_until = $3, source = $4, updated_at = $5
				WHERE client_id = $1`, g.ClientID, g.AllocatedHours, g.ValidUntil, g.Source, now)
		}
		if err != nil || g.AllocatedHours == before && !created {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO credit_events (client_id, at, kind, allocated_delta, source)
			VALUES ($1, $2, 'allocation', $3, $4)`, g.ClientID, now, g.AllocatedHours-before, g.Source)
		return err
	})
	return created, err
}

// SetKey makes hash the client's one active API key: it is added if new
// (or reinstated) and every other key of the client is revoked. Calling it
// again with the same hash changes nothing.
func (s *Store) SetKey(ctx context.Context, clientID string, hash credential.KeyHash, now time.Time) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			INSERT INTO api_keys (key_sha256, client_id, created_at) VALUES ($1, $2, $3)
			ON CONFLICT (key_sha256) DO UPDATE SET revoked_at = NULL
			WHERE api_keys.client_id = EXCLUDED.client_id`, hash[:], clientID, now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: this API key already belongs to another client", ErrInvalid)
		}
		_, err = tx.Exec(ctx, `
			UPDATE api_keys SET revoked_at = $3
			WHERE client_id = $1 AND key_sha256 <> $2 AND revoked_at IS NULL`, clientID, hash[:], now)
		return err
	})
}

// RevokeKeys revokes every API key of the client; the ledger rows stay.
func (s *Store) RevokeKeys(ctx context.Context, clientID string, now time.Time) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = $2 WHERE client_id = $1 AND revoked_at IS NULL`, clientID, now)
	return err
}

// Client returns the client with this id, or ErrNotFound.
func (s *Store) Client(ctx context.Context, clientID string) (Client, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var c Client
	err := s.pool.QueryRow(ctx, `
		SELECT client_id, allocated_hours, consumed_hours, valid_until FROM clients WHERE client_id = $1`, clientID).
		Scan(&c.ID, &c.AllocatedHours, &c.ConsumedHours, &c.ValidUntil)
	if errors.Is(err, pgx.ErrNoRows) {
		return Client{}, ErrNotFound
	}
	return c, err
}

// ClientByKey returns the client holding the active key with this hash, or
// ErrNotFound.
func (s *Store) ClientByKey(ctx context.Context, hash credential.KeyHash) (Client, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var c Client
	err := s.pool.QueryRow(ctx, `
		SELECT c.client_id, c.allocated_hours, c.consumed_hours, c.valid_until
		FROM api_keys k JOIN clients c USING (client_id)
		WHERE k.key_sha256 = $1 AND k.revoked_at IS NULL`, hash[:]).
		Scan(&c.ID, &c.AllocatedHours, &c.ConsumedHours, &c.ValidUntil)
	if errors.Is(err, pgx.ErrNoRows) {
		return Client{}, ErrNotFound
	}
	return c, err
}

// Usage returns the client's figures at now.
func (s *Store) Usage(ctx context.Context, clientID string, now time.Time) (Usage, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	u := Usage{ClientID: clientID}
	err := s.pool.QueryRow(ctx, `
		SELECT allocated_hours, consumed_hours,
		       (SELECT count(*) FROM sessions WHERE client_id = $1 AND expires_at > $2)
		FROM clients WHERE client_id = $1`, clientID, now).
		Scan(&u.AllocatedHours, &u.ConsumedHours, &u.ActiveSessions)
	if errors.Is(err, pgx.ErrNoRows) {
		return Usage{}, ErrNotFound
	}
	u.RemainingHours = max(0, u.AllocatedHours-u.ConsumedHours)
	return u, err
}
