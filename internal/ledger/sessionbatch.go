package ledger

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalmeter/evalmeter/internal/credential"
)

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
	ctx    context.Context // bounded: it has a deadline
	key    string
	sess   Session
	source string

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
		case len(batch) == maxOpenBatch || holdsKey(batch, o.key):
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

func holdsKey(batch []*sessionOpen, key string) bool {
	for _, o := range batch {
		if o.key == key {
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
		ids, keys, tokenKeys, sources = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		issued, expires               = make([]time.Time, n), make([]time.Time, n)
		apiKeys                       = make([][]byte, n) // nil: opened by no key
	)
	for i, o := range batch {
		ids[i], keys[i], tokenKeys[i], sources[i] = o.sess.ID, o.key, o.sess.TokenKeyID, o.source
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
		ids, keys, issued, expires, tokenKeys, apiKeys, sources, client,
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
