package ledger_test

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
)

// Migrations expand, then contract (docs/development.md#migrations): while
// API pods roll, and after a downgrade of the image, the previous release's
// code runs on this release's schema.

// contractPatterns are the statements of an Up migration that can break the
// code of the release before it: it reads or writes what they remove or
// change, or inserts rows without what they require.
var contractPatterns = []struct {
	name string
	re   *regexp.Regexp
}{
	{"DROP TABLE", regexp.MustCompile(`\bDROP\s+TABLE\b`)},
	{"DROP COLUMN", regexp.MustCompile(`\bDROP\s+COLUMN\b`)},
	{"RENAME", regexp.MustCompile(`\bRENAME\b`)},
	{"ALTER COLUMN ... TYPE", regexp.MustCompile(`\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b`)},
	{"SET NOT NULL", regexp.MustCompile(`\bSET\s+NOT\s+NULL\b`)},
	{"ADD COLUMN ... NOT NULL without DEFAULT", regexp.MustCompile(`\bADD\s+COLUMN\s+[^,;]*\bNOT\s+NULL\b`)},
}

// contractStatements returns what, in a migration's Up section, only a
// contract migration may do. A line "-- contract: WHY" in the file says the
// migration contracts on purpose: the previous release no longer uses what
// it removes.
func contractStatements(sql string) []string {
	if regexp.MustCompile(`(?m)^--\s*contract:\s*\S`).MatchString(sql) {
		return nil
	}
	up, _, _ := strings.Cut(sql, "-- +goose Down")
	up = regexp.MustCompile(`--[^\n]*`).ReplaceAllString(up, "")
	up = strings.ToUpper(up)
	var found []string
	for _, stmt := range strings.Split(up, ";") {
		for _, p := range contractPatterns {
			if !p.re.MatchString(stmt) {
				continue
			}
			if p.name == "ADD COLUMN ... NOT NULL without DEFAULT" && strings.Contains(stmt, "DEFAULT") {
				continue
			}
			found = append(found, p.name)
		}
	}
	return found
}

func TestContractStatements(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want string // the first statement found; "" for none
	}{
		{"-- +goose Up\nALTER TABLE a ADD COLUMN b text;\nCREATE INDEX a_b ON a (b);\n-- +goose Down\nDROP INDEX a_b;\nALTER TABLE a DROP COLUMN b;\n", ""},
		{"-- +goose Up\nALTER TABLE a ADD COLUMN n int NOT NULL DEFAULT 0;\n", ""},
		{"-- +goose Up\n-- we used to DROP COLUMN here\nALTER TABLE a ADD COLUMN b text;\n", ""},
		{"-- +goose Up\nalter table a drop column b;\n", "DROP COLUMN"},
		{"-- +goose Up\nDROP TABLE a;\n", "DROP TABLE"},
		{"-- +goose Up\nALTER TABLE a RENAME COLUMN b TO c;\n", "RENAME"},
		{"-- +goose Up\nALTER TABLE a ALTER COLUMN b TYPE bigint;\n", "ALTER COLUMN ... TYPE"},
		{"-- +goose Up\nALTER TABLE a ALTER COLUMN b SET NOT NULL;\n", "SET NOT NULL"},
		{"-- +goose Up\nALTER TABLE a ADD COLUMN n int NOT NULL;\n", "ADD COLUMN ... NOT NULL without DEFAULT"},
		{"-- +goose Up\n-- contract: v0.3.0 no longer reads a.b (v0.4.0)\nALTER TABLE a DROP COLUMN b;\n", ""},
	} {
		got := contractStatements(c.sql)
		if c.want == "" && len(got) > 0 || c.want != "" && (len(got) == 0 || got[0] != c.want) {
			t.Errorf("contractStatements(%q) = %q, want %q", c.sql, got, c.want)
		}
	}
}

// TestMigrationsExpand: no migration contracts the schema by accident.
func TestMigrationsExpand(t *testing.T) {
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if found := contractStatements(string(b)); len(found) > 0 {
			t.Errorf("%s: its Up section has %s, which breaks the previous release's code while pods roll and after a downgrade: "+
				"expand now, contract a release later with a line \"-- contract: WHY\" (docs/development.md#migrations)", f, strings.Join(found, ", "))
		}
	}
}

// TestNewerSchema: this release's code runs on the schema of a newer one, as
// after a downgrade of the image: its migrations see a version they do not
// know and succeed, and the ledger works with columns it does not know.
func TestNewerSchema(t *testing.T) {
	url := pgtest.NewDatabase(t)
	if err := ledger.Migrate(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	// A newer release's expand migration.
	for _, sql := range []string{
		`ALTER TABLE clients ADD COLUMN future_note text`,
		`ALTER TABLE sessions ADD COLUMN future_flag boolean NOT NULL DEFAULT false`,
		`ALTER TABLE metrics_requests ADD COLUMN future_size integer`,
		`ALTER TABLE credit_events ADD COLUMN future_ref text`,
		`INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, true)`,
	} {
		if _, err := pgtest.Exec(t, url, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := ledger.Migrate(t.Context(), url); err != nil {
		t.Fatalf("migrating a database a newer release migrated: %v", err)
	}
	s, err := ledger.Open(t.Context(), url, ledger.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if _, err := s.UpsertClient(ctx, ledger.Grant{ClientID: "acme", AllocatedHours: 2, Source: "test"}, t0); err != nil {
		t.Fatalf("a grant on the newer schema: %v", err)
	}
	key := sha256.Sum256([]byte("key"))
	mustSetKey(t, s, "acme", key, t0)
	if c, err := s.ClientByKey(ctx, key, t0); err != nil || c.ID != "acme" {
		t.Fatalf("authenticating on the newer schema: %+v, %v", c, err)
	}
	sess := openSession(t, s, "acme", "sess_000000000000000000000001", t0)
	if again := openSession(t, s, "acme", "sess_000000000000000000000001", t0); again.ID != sess.ID {
		t.Errorf("replayed opening on the newer schema: session %s, want %s", again.ID, sess.ID)
	}
	if _, stored, err := s.SaveMetrics(ctx, sess, "key-0000000000001", record("a"), t0); err != nil || !stored {
		t.Fatalf("metrics on the newer schema: stored %t, %v", stored, err)
	}
	if u, err := s.Usage(ctx, "acme", t0); err != nil || u.ConsumedHours != 1 {
		t.Fatalf("usage on the newer schema: %+v, %v", u, err)
	}
}
