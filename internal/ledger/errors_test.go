package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
)

// TestUnavailableClassifies: which errors make the API answer 503 (PostgreSQL
// cannot serve now) and which are bugs (500). Most are provoked from a real
// PostgreSQL; the rest are the PgErrors it sends in situations a test
// cannot easily make (a password rotation, a failover, a full disk).
func TestUnavailableClassifies(t *testing.T) {
	url := pgtest.NewDatabase(t)
	ctx := t.Context()
	connect := func(t *testing.T) *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	exec := func(t *testing.T, conn *pgx.Conn, sql ...string) error {
		t.Helper()
		var err error
		for _, s := range sql {
			if _, err = conn.Exec(ctx, s); err != nil {
				break
			}
		}
		return err
	}
	pgErr := func(code string) error {
		return fmt.Errorf("querying: %w", &pgconn.PgError{Severity: "ERROR", Code: code, Message: "constructed"})
	}

	tests := []struct {
		name     string
		err      func(t *testing.T) error
		wantCode string // the SQLSTATE the provoked error must carry; "" for none
		want     bool
	}{
		// Unavailable: PostgreSQL says "not now".
		{"read-only after a failover (25006)", func(t *testing.T) error {
			return exec(t, connect(t), `SET default_transaction_read_only = on`, `CREATE TABLE t (x int)`)
		}, "25006", true},
		{"statement timeout (57014)", func(t *testing.T) error {
			return exec(t, connect(t), `SET statement_timeout = '50ms'`, `SELECT pg_sleep(5)`)
		}, "57014", true},
		{"lock timeout (55P03)", func(t *testing.T) error {
			holder := connect(t)
			if err := exec(t, holder, `CREATE TABLE IF NOT EXISTS locked (x int)`); err != nil {
				t.Fatal(err)
			}
			tx, err := holder.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `LOCK TABLE locked`); err != nil {
				t.Fatal(err)
			}
			return exec(t, connect(t), `SET lock_timeout = '50ms'`, `SELECT * FROM locked`)
		}, "55P03", true},
		{"serialization failure (40001)", func(t *testing.T) error {
			a, b := connect(t), connect(t)
			if err := exec(t, a, `CREATE TABLE IF NOT EXISTS ser (id int PRIMARY KEY, v int)`, `INSERT INTO ser VALUES (1, 0) ON CONFLICT DO NOTHING`); err != nil {
				t.Fatal(err)
			}
			tx, err := a.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `SELECT v FROM ser WHERE id = 1`); err != nil {
				t.Fatal(err)
			}
			if err := exec(t, b, `UPDATE ser SET v = v + 1 WHERE id = 1`); err != nil {
				t.Fatal(err)
			}
			_, err = tx.Exec(ctx, `UPDATE ser SET v = v + 1 WHERE id = 1`)
			return err
		}, "40001", true},
		{"deadlock (40P01)", func(t *testing.T) error {
			a, b := connect(t), connect(t)
			if err := exec(t, a, `CREATE TABLE IF NOT EXISTS dl (id int PRIMARY KEY)`, `INSERT INTO dl VALUES (1), (2) ON CONFLICT DO NOTHING`); err != nil {
				t.Fatal(err)
			}
			ta, _ := a.Begin(ctx)
			tb, _ := b.Begin(ctx)
			defer ta.Rollback(ctx)
			defer tb.Rollback(ctx)
			for _, step := range []struct {
				tx pgx.Tx
				id int
			}{{ta, 1}, {tb, 2}} {
				if _, err := step.tx.Exec(ctx, `SELECT 1 FROM dl WHERE id = $1 FOR UPDATE`, step.id); err != nil {
					t.Fatal(err)
				}
			}
			// Each waits for the other's row: PostgreSQL cancels one.
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i, step := range []struct {
				tx pgx.Tx
				id int
			}{{ta, 2}, {tb, 1}} {
				wg.Go(func() {
					if _, errs[i] = step.tx.Exec(ctx, `SELECT 1 FROM dl WHERE id = $1 FOR UPDATE`, step.id); errs[i] != nil {
						step.tx.Rollback(ctx) // releases the other
					}
				})
			}
			wg.Wait()
			return errors.Join(errs...)
		}, "40P01", true},
		{"too many connections for a role (53300)", func(t *testing.T) error {
			role := "pgtest_limited_" + strings.ToLower(strings.ReplaceAll(time.Now().Format("150405.000000"), ".", ""))
			admin := connect(t)
			if err := exec(t, admin, `CREATE ROLE `+role+` LOGIN CONNECTION LIMIT 0`); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { exec(t, admin, `DROP ROLE `+role) })
			_, err := pgx.Connect(ctx, withUser(t, url, role))
			return err
		}, "53300", true},
		{"terminated by an administrator (57P01)", func(t *testing.T) error {
			victim, admin := connect(t), connect(t)
			if err := exec(t, admin, fmt.Sprintf(`SELECT pg_terminate_backend(%d)`, victim.PgConn().PID())); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // the FATAL message on its way
			return exec(t, victim, `SELECT 1`)
		}, "", true}, // 57P01, or the closed connection when it comes first
		{"unknown role: pg_hba or a role being changed (28000)", func(t *testing.T) error {
			_, err := pgx.Connect(ctx, withUser(t, url, "nobody"))
			return err
		}, "28000", true},
		{"connection refused", func(t *testing.T) error {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			_, err = pgx.Connect(ctx, "postgres://x@"+addr+"/x?connect_timeout=5")
			return err
		}, "", true},
		{"statement past its deadline", func(t *testing.T) error {
			dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, err := connect(t).Exec(dctx, `SELECT pg_sleep(5)`)
			return err
		}, "", true},
		{"invalid password (28P01)", func(*testing.T) error { return pgErr("28P01") }, "28P01", true},
		{"starting up (57P03)", func(*testing.T) error { return pgErr("57P03") }, "57P03", true},
		{"admin shutdown (57P01)", func(*testing.T) error { return pgErr("57P01") }, "57P01", true},
		{"crash shutdown (57P02)", func(*testing.T) error { return pgErr("57P02") }, "57P02", true},
		{"connection failure (08006)", func(*testing.T) error { return pgErr("08006") }, "08006", true},
		{"disk full (53100)", func(*testing.T) error { return pgErr("53100") }, "53100", true},
		{"I/O error (58030)", func(*testing.T) error { return pgErr("58030") }, "58030", true},
		{"connection lost mid-message", func(*testing.T) error { return fmt.Errorf("reading: %w", io.ErrUnexpectedEOF) }, "", true},
		{"network error", func(*testing.T) error {
			return &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
		}, "", true},
		{"context deadline", func(*testing.T) error { return fmt.Errorf("x: %w", context.DeadlineExceeded) }, "", true},

		// Bugs: PostgreSQL refuses the statement as written, or no
		// network or server explains the error.
		{"syntax error (42601)", func(t *testing.T) error { return exec(t, connect(t), `SELEC 1`) }, "42601", false},
		{"undefined column (42703)", func(t *testing.T) error { return exec(t, connect(t), `SELECT nope FROM pg_class`) }, "42703", false},
		{"unique violation (23505)", func(t *testing.T) error {
			return exec(t, connect(t), `CREATE TEMP TABLE u (x int PRIMARY KEY)`, `INSERT INTO u VALUES (1), (1)`)
		}, "23505", false},
		{"division by zero (22012)", func(t *testing.T) error { return exec(t, connect(t), `SELECT 1/0`) }, "22012", false},
		{"database that does not exist (3D000)", func(t *testing.T) error {
			u, err := neturl.Parse(url)
			if err != nil {
				t.Fatal(err)
			}
			u.Path = "/no_such_database"
			_, err = pgx.Connect(ctx, u.String())
			return err
		}, "3D000", false},
		{"scan into the wrong type", func(t *testing.T) error {
			var n int
			return connect(t).QueryRow(ctx, `SELECT 'x'::text`).Scan(&n)
		}, "", false},
		{"internal error (XX000)", func(*testing.T) error { return pgErr("XX000") }, "XX000", false},
		{"a plain Go error", func(*testing.T) error { return errors.New("index out of range") }, "", false},
		{"the client went away", func(*testing.T) error { return fmt.Errorf("x: %w", context.Canceled) }, "", false},
		{"not found", func(*testing.T) error { return ledger.ErrNotFound }, "", false},
		{"no credit", func(*testing.T) error { return ledger.ErrNoCredit }, "", false},
		{"no rows", func(*testing.T) error { return pgx.ErrNoRows }, "", false},
		{"nil", func(*testing.T) error { return nil }, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err(t)
			var pe *pgconn.PgError
			if tt.wantCode != "" && (!errors.As(err, &pe) || pe.Code != tt.wantCode) {
				t.Fatalf("provoked %v (%T), want SQLSTATE %s", err, err, tt.wantCode)
			}
			if got := ledger.Unavailable(err); got != tt.want {
				t.Errorf("Unavailable(%v) = %v, want %v", err, got, tt.want)
			}
		})
	}
}

func withUser(t *testing.T, url, user string) string {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.User(user)
	return u.String()
}
