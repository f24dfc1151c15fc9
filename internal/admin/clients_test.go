package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestClients: migrate, then grant and show as an operator without
// Kubernetes would.
func TestClients(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.NewDatabase(t))
	evalmeter := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		status := clients(args[1:], &stdout, &stderr)
		return status, stdout.String(), stderr.String()
	}
	keyLine := regexp.MustCompile(`^evk_[A-Za-z0-9_-]{43}\n$`)

	if err := ledger.Migrate(context.Background(), os.Getenv("DATABASE_URL")); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	status, first, stderr := evalmeter("clients", "grant", "--client-id", "acme", "--hours", "10", "--valid-until", "2027-06-30T23:59:59Z")
	if status != 0 || !keyLine.MatchString(first) || !strings.Contains(stderr, "shown only this once") {
		t.Fatalf("grant: %d, stdout %q, stderr %q", status, first, stderr)
	}
	// Raising the hours keeps the customer's key.
	if status, out, stderr := evalmeter("clients", "grant", "--client-id", "acme", "--hours", "12"); status != 0 || out != "" || !strings.Contains(stderr, "unchanged") {
		t.Errorf("regrant: %d, stdout %q, stderr %q", status, out, stderr)
	}
	status, rotated, stderr := evalmeter("clients", "grant", "--client-id", "acme", "--hours", "12", "--rotate-key", "--rotation-grace", "1h")
	if status != 0 || !keyLine.MatchString(rotated) || rotated == first || strings.Count(stderr, " works until ") != 1 {
		t.Errorf("rotate with a grace period: %d %q %q", status, rotated, stderr)
	}
	// Without grace, during the first one's: both old keys revoked at once.
	status, again, stderr := evalmeter("clients", "grant", "--client-id", "acme", "--hours", "12", "--rotate-key")
	if status != 0 || !keyLine.MatchString(again) || again == rotated || strings.Count(stderr, " revoked\n") != 2 {
		t.Errorf("rotate at once during a grace period: %d %q %q", status, again, stderr)
	}

	status, out, stderr := evalmeter("clients", "show", "--client-id", "acme")
	var shown struct {
		ClientID       string  `json:"client_id"`
		AllocatedHours int     `json:"allocated_hours"`
		RemainingHours int     `json:"remaining_hours"`
		ValidUntil     *string `json:"valid_until"`
	}
	if err := json.Unmarshal([]byte(out), &shown); status != 0 || err != nil {
		t.Fatalf("show: %d %v %s %s", status, err, out, stderr)
	}
	// --hours 12 without --valid-until ends the validity: grant sets it all.
	if shown.ClientID != "acme" || shown.AllocatedHours != 12 || shown.RemainingHours != 12 || shown.ValidUntil != nil {
		t.Errorf("show: %s", out)
	}

	for _, args := range [][]string{
		{"clients", "grant", "--client-id", "Acme", "--hours", "1"},
		{"clients", "grant", "--client-id", "acme"},
		{"clients", "grant", "--client-id", "acme", "--hours", "1", "--valid-until", "next june"},
		{"clients", "show", "--client-id", "nobody"},
		{"clients", "delete", "--client-id", "acme"},
		{"clients", "grant", "--client-id", "acme", "--hours", "1", "--rotate-key", "--rotation-grace", "721h"},
	} {
		if status, out, stderr := evalmeter(args...); status != 2 || out != "" || stderr == "" {
			t.Errorf("%v: %d, stdout %q, stderr %q; want 2 and a reason", args, status, out, stderr)
		}
	}
}

// TestClientsAudit: the credit events of a client, with the order each
// allocation was made under, and the monthly report, as JSON and CSV.
func TestClientsAudit(t *testing.T) {
	url := pgtest.NewDatabase(t)
	t.Setenv("DATABASE_URL", url)
	evalmeter := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		status := clients(args[1:], &stdout, &stderr)
		return status, stdout.String(), stderr.String()
	}
	if err := ledger.Migrate(context.Background(), os.Getenv("DATABASE_URL")); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	for _, grant := range [][]string{
		{"--hours", "10", "--order-reference", "PO-1"},
		{"--hours", "12", "--order-reference", "=HYPERLINK(\"x\")"},
	} {
		if status, _, stderr := evalmeter(append([]string{"clients", "grant", "--client-id", "acme"}, grant...)...); status != 0 {
			t.Fatalf("grant: %d %s", status, stderr)
		}
	}
	store, err := ledger.Open(t.Context(), url, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// Sessions in months of their own, away from the grants' (now).
	for i, at := range []time.Time{
		time.Date(2031, 1, 31, 23, 59, 0, 0, time.UTC),
		time.Date(2031, 2, 1, 0, 0, 0, 0, time.UTC),
	} {
		sess := ledger.Session{ID: fmt.Sprintf("sess_%024d", i), ClientID: "acme", IssuedAt: at, ExpiresAt: at.Add(time.Hour), TokenKeyID: "k"}
		if _, _, err := store.OpenSession(t.Context(), fmt.Sprintf("audit-session-%04d", i), sess, "api"); err != nil {
			t.Fatal(err)
		}
	}

	status, out, stderr := evalmeter("clients", "events", "--client-id", "acme")
	var events []ledger.Event
	if err := json.Unmarshal([]byte(out), &events); status != 0 || err != nil {
		t.Fatalf("events: %d %v %s %s", status, err, out, stderr)
	}
	var got []string
	for _, e := range events {
		got = append(got, fmt.Sprintf("%s %+d %+d %s %s", e.Kind, e.AllocatedDelta, e.ConsumedDelta, e.SessionID, e.OrderReference))
	}
	want := []string{
		"allocation +10 +0  PO-1",
		`allocation +2 +0  =HYPERLINK("x")`,
		"session +0 +1 sess_000000000000000000000000 ",
		"session +0 +1 sess_000000000000000000000001 ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if status, out, _ := evalmeter("clients", "events", "--client-id", "acme", "--since", "2031-02-01"); status != 0 || strings.Count(out, `"kind"`) != 1 || !strings.Contains(out, "sess_000000000000000000000001") {
		t.Errorf("events --since: %d %s", status, out)
	}
	status, out, _ = evalmeter("clients", "events", "--client-id", "acme", "--output", "csv")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if status != 0 || len(lines) != 5 || lines[0] != "id,at,kind,allocated_delta,consumed_delta,session_id,source,order_reference" ||
		!strings.HasSuffix(lines[2], `,2,0,,cli,"'=HYPERLINK(""x"")"`) {
		t.Errorf("events as CSV (the formula neutralized): %d\n%s", status, out)
	}

	status, out, _ = evalmeter("clients", "report", "--month", "2031-01", "--output", "csv")
	if want := "month,client_id,sessions,allocated_delta\n2031-01,acme,1,0\n"; status != 0 || out != want {
		t.Errorf("report for January 2031: %d %q, want %q", status, out, want)
	}
	status, out, _ = evalmeter("clients", "report", "--month", time.Now().UTC().Format("2006-01"))
	var report []ledger.MonthUsage
	if err := json.Unmarshal([]byte(out), &report); status != 0 || err != nil || len(report) != 1 || report[0].AllocatedDelta != 12 || report[0].Sessions != 0 {
		t.Errorf("report for this month: %d %v %s", status, err, out)
	}
	if status, out, _ := evalmeter("clients", "report", "--month", "1999-01"); status != 0 || out != "[]\n" {
		t.Errorf("report for an empty month: %d %q", status, out)
	}

	for _, args := range [][]string{
		{"clients", "report", "--month", "2026-13"},
		{"clients", "report"},
		{"clients", "events", "--client-id", "acme", "--output", "xml"},
		{"clients", "events", "--client-id", "acme", "--since", "yesterday"},
		{"clients", "events", "--client-id", "nobody"},
	} {
		if status, _, stderr := evalmeter(args...); status != 2 || stderr == "" {
			t.Errorf("%v: %d %q, want 2 and a message", args, status, stderr)
		}
	}
}
