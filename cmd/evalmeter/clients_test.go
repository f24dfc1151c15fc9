package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/evalmeter/evalmeter/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestClients: migrate, then grant and show as an operator without
// Kubernetes would.
func TestClients(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.NewDatabase(t))
	evalmeter := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		status := run(args, nil, &stdout, &stderr)
		return status, stdout.String(), stderr.String()
	}
	keyLine := regexp.MustCompile(`^evk_[A-Za-z0-9_-]{43}\n$`)

	if status, _, stderr := evalmeter("migrate"); status != 0 {
		t.Fatalf("migrate: %d %s", status, stderr)
	}
	status, first, stderr := evalmeter("clients", "grant", "--client-id", "acme", "--hours", "10", "--valid-until", "2027-06-30T23:59:59Z")
	if status != 0 || !keyLine.MatchString(first) || !strings.Contains(stderr, "shown only this once") {
		t.Fatalf("grant: %d, stdout %q, stderr %q", status, first, stderr)
	}
	// Raising the hours keeps the customer's key.
	if status, out, stderr := evalmeter("clients", "grant", "--client-id", "acme", "--hours", "12"); status != 0 || out != "" || !strings.Contains(stderr, "unchanged") {
		t.Errorf("regrant: %d, stdout %q, stderr %q", status, out, stderr)
	}
	status, rotated, _ := evalmeter("clients", "grant", "--client-id", "acme", "--hours", "12", "--rotate-key")
	if status != 0 || !keyLine.MatchString(rotated) || rotated == first {
		t.Errorf("rotate: %d %q", status, rotated)
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
	} {
		if status, out, stderr := evalmeter(args...); status != 2 || out != "" || stderr == "" {
			t.Errorf("%v: %d, stdout %q, stderr %q; want 2 and a reason", args, status, out, stderr)
		}
	}
}
