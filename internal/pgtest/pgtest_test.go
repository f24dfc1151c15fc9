package pgtest

import (
	"context"
	"errors"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestMain(m *testing.M) { Main(m) }

func TestDatabaseName(t *testing.T) {
	shape := regexp.MustCompile(`^pgtest_([a-z0-9_]+)_[0-9]+_[0-9a-f]{8}$`)
	tests := []struct {
		testName string
		wantBase string // the test-name part; a prefix of it when truncated
		truncate bool
	}{
		{"TestX", "testx", false},
		{"TestX/sub_test#01", "testx_sub_test_01", false},
		{"TestÄrger/ü ß--x", "test_rger_x", false},
		{"///", "test", false},
		{"_Lead_and_trail_", "lead_and_trail", false},
		{strings.Repeat("Long/", 30), strings.Repeat("long_", 30), true},
	}
	for _, tt := range tests {
		t.Run(tt.testName, func(t *testing.T) {
			a, b := databaseName(tt.testName), databaseName(tt.testName)
			if a == b {
				t.Errorf("two names for %q are both %q", tt.testName, a)
			}
			for _, name := range []string{a, b} {
				if len(name) > maxIdentifier {
					t.Errorf("databaseName(%q) = %q: %d bytes, more than %d", tt.testName, name, len(name), maxIdentifier)
				}
				m := shape.FindStringSubmatch(name)
				if m == nil {
					t.Fatalf("databaseName(%q) = %q, not of the shape %s", tt.testName, name, shape)
				}
				base := m[1]
				if tt.truncate {
					if !strings.HasPrefix(tt.wantBase, base) || len(base) < 30 || strings.HasSuffix(base, "_") {
						t.Errorf("databaseName(%q) = %q: want a prefix of %q of 30+ bytes not ending in _", tt.testName, name, tt.wantBase)
					}
				} else if base != tt.wantBase {
					t.Errorf("databaseName(%q) = %q: want test-name part %q", tt.testName, name, tt.wantBase)
				}
			}
		})
	}
}

func TestNewDatabase(t *testing.T) {
	for _, name := range []string{"plain", "Mixed Case/and spaces-ÄÖ", strings.Repeat("long_name_", 10)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			u := NewDatabase(t)
			conn := connect(t, u)
			var one int
			var db string
			if err := conn.QueryRow(ctx(t), "SELECT 1, current_database()").Scan(&one, &db); err != nil {
				t.Fatalf("SELECT 1: %v", err)
			}
			if one != 1 {
				t.Errorf("SELECT 1 = %d", one)
			}
			if want := databaseOf(t, u); db != want || len(db) > maxIdentifier {
				t.Errorf("current_database() = %q, want %q of at most %d bytes", db, want, maxIdentifier)
			}
		})
	}
}

// TestExec: Exec returns the rows a statement affected, and the error of a
// statement that fails.
func TestExec(t *testing.T) {
	u := NewDatabase(t)
	if _, err := Exec(t, u, "CREATE TABLE t (n int)"); err != nil {
		t.Fatal(err)
	}
	if n, err := Exec(t, u, "INSERT INTO t SELECT generate_series(1, 3)"); n != 3 || err != nil {
		t.Errorf("INSERT of 3 rows: %d rows, %v", n, err)
	}
	var pgErr *pgconn.PgError
	if _, err := Exec(t, u, "SELECT 1/0"); !errors.As(err, &pgErr) || pgErr.Code != "22012" {
		t.Errorf("SELECT 1/0: %v, want division_by_zero", err)
	}
}

func TestNewDatabaseDistinct(t *testing.T) {
	t.Parallel()
	a, b := NewDatabase(t), NewDatabase(t)
	if a == b {
		t.Fatalf("two NewDatabase calls gave the same URL %s", a)
	}
	connA, connB := connect(t, a), connect(t, b)
	if _, err := connA.Exec(ctx(t), "CREATE TABLE marker (id int)"); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	for _, c := range []struct {
		name string
		conn *pgx.Conn
		want bool
	}{{"first", connA, true}, {"second", connB, false}} {
		var exists bool
		if err := c.conn.QueryRow(ctx(t), "SELECT to_regclass('public.marker') IS NOT NULL").Scan(&exists); err != nil {
			t.Fatalf("%s database: %v", c.name, err)
		}
		if exists != c.want {
			t.Errorf("%s database: table marker exists = %v, want %v", c.name, exists, c.want)
		}
	}
}

func TestNewDatabaseDroppedAfterCleanup(t *testing.T) {
	var u string
	var open *pgx.Conn // left open past the drop, which must not wait for it (WITH (FORCE))
	t.Cleanup(func() {
		if open != nil {
			open.Close(context.Background())
		}
	})
	t.Run("user", func(t *testing.T) {
		u = NewDatabase(t)
		var err error
		if open, err = pgx.Connect(ctx(t), u); err != nil {
			t.Fatalf("connect: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	conn, err := pgx.Connect(ctx(t), u)
	if err == nil {
		conn.Close(ctx(t))
		t.Fatalf("database %s still exists after its test's cleanup", databaseOf(t, u))
	}
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		t.Fatalf("connect after cleanup: %v; want database does not exist (3D000)", err)
	}
}

func TestNewCluster(t *testing.T) {
	start := time.Now()
	c := NewCluster(t)
	t.Logf("initdb and start: %v", time.Since(start))
	u := c.URL()

	conn := connect(t, u)
	if _, err := conn.Exec(ctx(t), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('survives')"); err != nil {
		t.Fatalf("write a row: %v", err)
	}
	conn.Close(ctx(t))

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if conn, err := pgx.Connect(ctx(t), u); err == nil {
		conn.Close(ctx(t))
		t.Fatalf("connected to %s after Stop", u)
	} else {
		t.Logf("after Stop, as expected: %v", err)
	}

	start = time.Now()
	if err := c.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	t.Logf("restart: %v", time.Since(start))
	if got := c.URL(); got != u {
		t.Errorf("URL after Restart = %s, want %s", got, u)
	}
	var v string
	if err := connect(t, u).QueryRow(ctx(t), "SELECT v FROM kept").Scan(&v); err != nil {
		t.Fatalf("read the row after Restart: %v", err)
	}
	if v != "survives" {
		t.Errorf("row after Restart = %q, want %q", v, "survives")
	}

	// Cluster.NewDatabase: dropped by its cleanup, before the cluster closes.
	connect(t, c.NewDatabase(t))
}

func TestStartIdempotentAndClose(t *testing.T) {
	dir, err := os.MkdirTemp("", "pgtest-start-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Start(dir)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { c.Close() }) // if a check below fails first
	connect(t, c.URL())

	again, err := Start(dir)
	if err != nil {
		t.Fatalf("Start on a running cluster: %v", err)
	}
	if again.URL() != c.URL() {
		t.Errorf("Start on a running cluster: URL %s, want %s", again.URL(), c.URL())
	}

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close, stat %s: %v; want it removed", dir, err)
	}
	if conn, err := pgx.Connect(ctx(t), c.URL()); err == nil {
		conn.Close(ctx(t))
		t.Errorf("connected to %s after Close", c.URL())
	}
}

// connect opens a connection to u, closed when the test ends.
func connect(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx(t), u)
	if err != nil {
		t.Fatalf("connect to %s: %v", u, err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn.Close(c)
	})
	return conn
}

// ctx bounds one database round trip.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func databaseOf(t *testing.T, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(parsed.Path, "/")
}
