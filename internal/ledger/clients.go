package ledger

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
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
	OrderReference string     // the written order, for the credit events
	// LowCreditThreshold is the remaining hours at or below which the
	// client is warned; nil: never.
	LowCreditThreshold *int
	// Owner is the ClientAgreement that provisions the client; zero for
	// `evalmeter clients grant`, which may not change an owned client.
	Owner Owner
}

// Owner names the ClientAgreement that owns a client (the columns
// clients.holder_uid and holder_name).
type Owner struct {
	UID  string // metadata.uid: a re-created agreement is another owner
	Name string // namespace/name, to find it and to say who owns it
}

// OwnedError is a write refused because another agreement owns the client.
// The caller decides whether that owner still exists; if it does not, it
// may Release the client on its behalf and write again.
type OwnedError struct {
	ClientID string
	Owner    Owner
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("client %s is held by ClientAgreement %s (uid %s); change that agreement, or delete it first", e.ClientID, e.Owner.Name, e.Owner.UID)
}

// clientIDPattern is the ClientAgreement's clientID rule (docs/design.md#101-the-clientagreement).
var clientIDPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate checks a grant before it reaches the database.
func (g Grant) Validate() error {
	if !clientIDPattern.MatchString(g.ClientID) {
		return fmt.Errorf("%w client id %q: use 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit", ErrInvalid, g.ClientID)
	}
	if g.LowCreditThreshold != nil && *g.LowCreditThreshold < 0 {
		return fmt.Errorf("%w low-credit threshold %d: must be 0 or more", ErrInvalid, *g.LowCreditThreshold)
	}
	if g.AllocatedHours < 0 {
		return fmt.Errorf("%w allocated hours %d: must be 0 or more", ErrInvalid, g.AllocatedHours)
	}
	if (g.Owner.UID == "") != (g.Owner.Name == "") {
		return fmt.Errorf("%w owner %+v: give both its uid and its name, or neither", ErrInvalid, g.Owner)
	}
	return nil
}

// Client is a client as the API sees it.
type Client struct {
	ID             string
	AllocatedHours int
	ConsumedHours  int
	ValidUntil     *time.Time
	// Key is the API key it was found by (ClientByKey only).
	Key credential.KeyHash
}

// Expired reports whether the client's agreement has ended at now.
func (c Client) Expired(now time.Time) bool {
	return c.ValidUntil != nil && !now.Before(*c.ValidUntil)
}

// Usage is the figures of GET /api/svc/v1/usage (docs/design.md#35-usage).
type Usage struct {
	ClientID       string
	AllocatedHours int
	ConsumedHours  int
	RemainingHours int // never negative, even after an allocation is lowered
	ActiveSessions int
	// LowCreditThreshold is the client's warning threshold; nil: none.
	LowCreditThreshold *int
}

// LowCredit reports whether the remaining hours are at or below the
// client's low-credit threshold.
func (u Usage) LowCredit() bool {
	return u.LowCreditThreshold != nil && u.RemainingHours <= *u.LowCreditThreshold
}

// UpsertClient creates the client or updates its allocation and validity,
// recording a credit event when the allocation changes. It reports whether
// the client was created. A client owned by another agreement is refused
// with an *OwnedError; a grant with an Owner takes a client nobody owns.
//
// A grant that changes nothing writes nothing and locks nothing, so that
// the controller's periodic resync costs PostgreSQL one read.
func (s *Store) UpsertClient(ctx context.Context, g Grant, now time.Time) (created bool, err error) {
	if err := g.Validate(); err != nil {
		return false, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	row, err := readClientRow(ctx, s.pool, g.ClientID, false)
	if err != nil || row.found && row.same(g) {
		return false, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		row, err := readClientRow(ctx, tx, g.ClientID, true)
		if err != nil {
			return err
		}
		if err := row.writableBy(g); err != nil {
			return err
		}
		ownerUID, ownerName := nullable(g.Owner.UID), nullable(g.Owner.Name)
		if !row.found {
			created = true
			_, err = tx.Exec(ctx, `
				INSERT INTO clients (client_id, allocated_hours, valid_until, source, holder_uid, holder_name, low_credit_threshold, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`, g.ClientID, g.AllocatedHours, g.ValidUntil, g.Source, ownerUID, ownerName, g.LowCreditThreshold, now)
		} else {
			_, err = tx.Exec(ctx, `
				UPDATE clients SET allocated_hours = $2, valid_until = $3, source = $4,
				       holder_uid = $5, holder_name = $6, low_credit_threshold = $7, updated_at = $8
				WHERE client_id = $1`, g.ClientID, g.AllocatedHours, g.ValidUntil, g.Source, ownerUID, ownerName, g.LowCreditThreshold, now)
		}
		if err != nil || g.AllocatedHours == row.allocated && !created {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO credit_events (client_id, at, kind, allocated_delta, source, order_reference)
			VALUES ($1, $2, 'allocation', $3, $4, $5)`, g.ClientID, now, g.AllocatedHours-row.allocated, g.Source, nullable(g.OrderReference))
		return err
	})
	return created, err
}

// clientRow is what UpsertClient compares a grant with.
type clientRow struct {
	found      bool
	allocated  int
	validUntil *time.Time
	source     string
	owner      Owner
	threshold  *int
}

func readClientRow(ctx context.Context, q querier, clientID string, lock bool) (clientRow, error) {
	sql := `SELECT allocated_hours, valid_until, source, coalesce(holder_uid, ''), coalesce(holder_name, ''), low_credit_threshold
		FROM clients WHERE client_id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	r := clientRow{found: true}
	err := q.QueryRow(ctx, sql, clientID).Scan(&r.allocated, &r.validUntil, &r.source, &r.owner.UID, &r.owner.Name, &r.threshold)
	if errors.Is(err, pgx.ErrNoRows) {
		return clientRow{}, nil
	}
	return r, err
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// nullable is NULL for "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// writableBy refuses a grant from anyone but the client's owner.
func (r clientRow) writableBy(g Grant) error {
	if !r.found || r.owner.UID == "" || r.owner.UID == g.Owner.UID {
		return nil
	}
	return &OwnedError{ClientID: g.ClientID, Owner: r.owner}
}

// same reports whether writing g would change nothing. PostgreSQL keeps
// microseconds, so validUntil is compared at that precision.
func (r clientRow) same(g Grant) bool {
	sameEnd := r.validUntil == nil && g.ValidUntil == nil ||
		r.validUntil != nil && g.ValidUntil != nil && r.validUntil.Equal(g.ValidUntil.Truncate(time.Microsecond))
	sameThreshold := r.threshold == nil && g.LowCreditThreshold == nil ||
		r.threshold != nil && g.LowCreditThreshold != nil && *r.threshold == *g.LowCreditThreshold
	return r.allocated == g.AllocatedHours && sameEnd && sameThreshold && r.source == g.Source &&
		r.owner.UID == g.Owner.UID && r.owner.Name == g.Owner.Name
}

// Release ends owner's ownership of the client, as its agreement is
// deleted: it revokes every key of the client and ends its open sessions,
// in one transaction. The ledger rows stay, for audit. It reports whether
// owner owned the client; when it did not, nothing changes.
func (s *Store) Release(ctx context.Context, clientID string, owner Owner, now time.Time) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var owned bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			UPDATE clients SET holder_uid = NULL, holder_name = NULL, updated_at = $3
			WHERE client_id = $1 AND holder_uid = $2`, clientID, owner.UID, now)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		owned = true
		// Keys in their grace period too: deletion revokes at once.
		if _, err := tx.Exec(ctx, `
			UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2), usable_until = NULL
			WHERE client_id = $1 AND (revoked_at IS NULL OR usable_until IS NOT NULL)`, clientID, now); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			UPDATE sessions SET ended_at = $2
			WHERE client_id = $1 AND ended_at IS NULL AND expires_at > $2`, clientID, now)
		return err
	})
	return owned, err
}

// ReleaseStale ends the ownership of an agreement that no longer exists, so
// that another may take the client; unlike Release it revokes nothing, since
// the next owner sets the key at once. It changes nothing unless stale still
// owns the client.
func (s *Store) ReleaseStale(ctx context.Context, clientID string, stale Owner, now time.Time) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `
		UPDATE clients SET holder_uid = NULL, holder_name = NULL, updated_at = $3
		WHERE client_id = $1 AND holder_uid = $2`, clientID, stale.UID, now)
	return err
}

var (
	// ErrKeyRevoked is a key that was revoked: it never becomes valid again.
	ErrKeyRevoked = fmt.Errorf("%w: this API key was revoked and can never be used again; put a new key in its place", ErrInvalid)
	// ErrKeyTaken is a key that belongs to another client.
	ErrKeyTaken = fmt.Errorf("%w: this API key belongs to another client; put a new key in its place", ErrInvalid)
)

// RevokedKey is a key that SetKey replaced.
type RevokedKey struct {
	Fingerprint string
	// UsableUntil ends its grace period; zero: revoked at once.
	UsableUntil time.Time
}

// SetKey makes hash the client's active API key: it is added if new, and
// every other key of the client is revoked. With a grace period the keys
// it replaces stay usable until now+grace (rounded up to a whole second,
// as Kubernetes shows times), and so do the sessions they open; without,
// they and their sessions end at once. A later rotation may shorten a grace
// period that still runs, never extend it. A revoked key is refused
// (ErrKeyRevoked), even one in its grace period, as is a key of another
// client (ErrKeyTaken). Calling it again with the active key reads and
// writes nothing.
//
// It returns the keys it revoked or whose grace period it shortened.
func (s *Store) SetKey(ctx context.Context, clientID string, hash credential.KeyHash, now time.Time, grace time.Duration) ([]RevokedKey, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var active, others int
	err := s.pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE key_sha256 = $2), count(*) FILTER (WHERE key_sha256 <> $2)
		FROM api_keys WHERE client_id = $1 AND revoked_at IS NULL`, clientID, hash[:]).Scan(&active, &others)
	if err != nil || active == 1 && others == 0 {
		return nil, err
	}
	var usableUntil *time.Time // nil: revoked at once
	if grace > 0 {
		t := now.Add(grace)
		if !t.Truncate(time.Second).Equal(t) {
			t = t.Truncate(time.Second).Add(time.Second)
		}
		usableUntil = &t
	}
	var revoked []RevokedKey
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		revoked = nil // a retried transaction starts over
		var keyClient string
		var wasRevoked bool
		err := tx.QueryRow(ctx, `SELECT client_id, revoked_at IS NOT NULL FROM api_keys WHERE key_sha256 = $1`, hash[:]).Scan(&keyClient, &wasRevoked)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			_, err = tx.Exec(ctx, `INSERT INTO api_keys (key_sha256, client_id, created_at) VALUES ($1, $2, $3)`, hash[:], clientID, now)
		case err != nil:
		case keyClient != clientID:
			return ErrKeyTaken
		case wasRevoked:
			return ErrKeyRevoked
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			UPDATE api_keys SET revoked_at = coalesce(revoked_at, $3),
			       usable_until = CASE WHEN $4::timestamptz IS NULL THEN NULL ELSE least(coalesce(usable_until, $4), $4) END
			WHERE client_id = $1 AND key_sha256 <> $2 AND (revoked_at IS NULL OR usable_until > $3)
			RETURNING key_sha256, usable_until`, clientID, hash[:], now, usableUntil)
		if err != nil {
			return err
		}
		var ended [][]byte // keys revoked at once, whose sessions end now
		for rows.Next() {
			var key []byte
			var until *time.Time
			if err := rows.Scan(&key, &until); err != nil {
				return err
			}
			var h credential.KeyHash
			copy(h[:], key)
			revoked = append(revoked, RevokedKey{Fingerprint: h.Fingerprint(), UsableUntil: orZero(until)})
			if until == nil {
				ended = append(ended, key)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			UPDATE sessions SET ended_at = $2
			WHERE key_sha256 = ANY($1) AND ended_at IS NULL AND expires_at > $2`, ended, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(revoked, func(a, b RevokedKey) int { return strings.Compare(a.Fingerprint, b.Fingerprint) })
	return revoked, nil
}

func orZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
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

// ClientByKey returns the client whose key has this hash, unless the key
// is revoked (and out of its grace period at now): ErrNotFound then, as
// when there is no such key.
func (s *Store) ClientByKey(ctx context.Context, hash credential.KeyHash, now time.Time) (Client, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var c Client
	err := s.pool.QueryRow(ctx, `
		SELECT c.client_id, c.allocated_hours, c.consumed_hours, c.valid_until
		FROM api_keys k JOIN clients c USING (client_id)
		WHERE k.key_sha256 = $1 AND (k.revoked_at IS NULL OR k.usable_until > $2)`, hash[:], now).
		Scan(&c.ID, &c.AllocatedHours, &c.ConsumedHours, &c.ValidUntil)
	if errors.Is(err, pgx.ErrNoRows) {
		return Client{}, ErrNotFound
	}
	c.Key = hash
	return c, err
}

// Usage returns the client's figures at now.
func (s *Store) Usage(ctx context.Context, clientID string, now time.Time) (Usage, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	u := Usage{ClientID: clientID}
	err := s.pool.QueryRow(ctx, `
		SELECT allocated_hours, consumed_hours,
		       (SELECT count(*) FROM sessions s LEFT JOIN api_keys k USING (key_sha256)
		        WHERE s.client_id = $1 AND s.expires_at > $2 AND s.ended_at IS NULL
		          AND (k.revoked_at IS NULL OR k.usable_until > $2)),
		       low_credit_threshold
		FROM clients WHERE client_id = $1`, clientID, now).
		Scan(&u.AllocatedHours, &u.ConsumedHours, &u.ActiveSessions, &u.LowCreditThreshold)
	if errors.Is(err, pgx.ErrNoRows) {
		return Usage{}, ErrNotFound
	}
	u.RemainingHours = max(0, u.AllocatedHours-u.ConsumedHours)
	return u, err
}
