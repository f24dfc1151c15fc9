package ledger

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Event is one row of the append-only credit events: an allocation change
// or a session opened.
type Event struct {
	ID             int64     `json:"id"`
	At             time.Time `json:"at"`
	Kind           string    `json:"kind"` // "allocation" or "session"
	AllocatedDelta int       `json:"allocated_delta"`
	ConsumedDelta  int       `json:"consumed_delta"`
	SessionID      string    `json:"session_id,omitempty"`
	Source         string    `json:"source"`
	OrderReference string    `json:"order_reference,omitempty"`
}

// Events calls fn with each credit event of the client at or after since,
// oldest first, reading them as they come rather than all at once.
func (s *Store) Events(ctx context.Context, clientID string, since time.Time, fn func(Event) error) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT id, at, kind, allocated_delta, consumed_delta, coalesce(session_id, ''), source, coalesce(order_reference, '')
		FROM credit_events WHERE client_id = $1 AND at >= $2 ORDER BY at, id`, clientID, since)
	if err != nil {
		return err
	}
	var e Event
	_, err = pgx.ForEachRow(rows, []any{&e.ID, &e.At, &e.Kind, &e.AllocatedDelta, &e.ConsumedDelta, &e.SessionID, &e.Source, &e.OrderReference},
		func() error { return fn(e) })
	return err
}

// MonthUsage is a client's credit movements in one calendar month (UTC).
type MonthUsage struct {
	ClientID       string `json:"client_id"`
	Month          string `json:"month"`    // 2026-11
	Sessions       int    `json:"sessions"` // credits consumed
	AllocatedDelta int    `json:"allocated_delta"`
}

// MonthlyUsage returns, for each client with credit events in the month
// that starts at month (UTC), the sessions opened and the allocation
// change, by client id.
func (s *Store) MonthlyUsage(ctx context.Context, month time.Time) ([]MonthUsage, error) {
	start := time.Date(month.Year(), month.Month(), 1, 0, 0, 0, 0, time.UTC)
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT client_id, count(*) FILTER (WHERE kind = 'session'), coalesce(sum(allocated_delta), 0)
		FROM credit_events WHERE at >= $1 AND at < $2
		GROUP BY client_id ORDER BY client_id`, start, start.AddDate(0, 1, 0))
	if err != nil {
		return nil, err
	}
	label := start.Format("2006-01")
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (MonthUsage, error) {
		u := MonthUsage{Month: label}
		err := row.Scan(&u.ClientID, &u.Sessions, &u.AllocatedDelta)
		return u, err
	})
}
