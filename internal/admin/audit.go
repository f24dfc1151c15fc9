package admin

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/evalmeter/evalmeter/internal/cli"
	"github.com/evalmeter/evalmeter/internal/ledger"
)

// clientEvents prints the client's credit events, oldest first, as they
// are read: a JSON array or CSV with a header.
func clientEvents(ctx context.Context, store *ledger.Store, clientID, since, output string, stdout, stderr io.Writer) int {
	from, err := parseSince(since)
	if err != nil {
		return cli.Failf(stderr, "clients events: %v", err)
	}
	if _, err := store.Client(ctx, clientID); errors.Is(err, ledger.ErrNotFound) {
		return cli.Failf(stderr, "clients events: no client %q", clientID)
	} else if err != nil {
		return cli.Failf(stderr, "clients events: %v", err)
	}
	w := newTable(stdout, output, []string{"id", "at", "kind", "allocated_delta", "consumed_delta", "session_id", "source", "order_reference"})
	err = store.Events(ctx, clientID, from, func(e ledger.Event) error {
		return w.row(e, strconv.FormatInt(e.ID, 10), e.At.UTC().Format(time.RFC3339Nano), e.Kind,
			strconv.Itoa(e.AllocatedDelta), strconv.Itoa(e.ConsumedDelta), e.SessionID, e.Source, e.OrderReference)
	})
	if err == nil {
		err = w.close()
	}
	if err != nil {
		return cli.Failf(stderr, "clients events: %v", err)
	}
	return 0
}

// monthlyReport prints each client's sessions (credits consumed) and
// allocation change in one month, for invoicing.
func monthlyReport(ctx context.Context, store *ledger.Store, month, output string, stdout, stderr io.Writer) int {
	m, err := time.Parse("2006-01", month)
	if err != nil {
		return cli.Failf(stderr, "clients report: --month %q: use YYYY-MM, e.g. 2026-11", month)
	}
	rows, err := store.MonthlyUsage(ctx, m)
	if err != nil {
		return cli.Failf(stderr, "clients report: %v", err)
	}
	w := newTable(stdout, output, []string{"month", "client_id", "sessions", "allocated_delta"})
	for _, u := range rows {
		if err := w.row(u, u.Month, u.ClientID, strconv.Itoa(u.Sessions), strconv.Itoa(u.AllocatedDelta)); err != nil {
			return cli.Failf(stderr, "clients report: %v", err)
		}
	}
	if err := w.close(); err != nil {
		return cli.Failf(stderr, "clients report: %v", err)
	}
	return 0
}

// parseSince reads --since: RFC 3339, or a UTC date; empty is the beginning.
func parseSince(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Time{}, errors.New("--since " + strconv.Quote(s) + ": use RFC 3339 (2026-11-01T00:00:00Z) or a date (2026-11-01)")
}

// table writes rows as a JSON array of objects or as CSV with a header,
// one row at a time.
type table struct {
	out  io.Writer
	csv  *csv.Writer
	rows int
}

func newTable(out io.Writer, format string, header []string) *table {
	t := &table{out: out}
	if format == "csv" {
		t.csv = csv.NewWriter(out)
		t.csv.Write(header)
	}
	return t
}

// row writes v as JSON, or cells as CSV.
func (t *table) row(v any, cells ...string) error {
	if t.csv != nil {
		for i, c := range cells {
			cells[i] = csvSafe(c)
		}
		return t.csv.Write(cells)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	sep := ",\n  "
	if t.rows == 0 {
		sep = "[\n  "
	}
	t.rows++
	_, err = io.WriteString(t.out, sep+string(b))
	return err
}

func (t *table) close() error {
	if t.csv != nil {
		t.csv.Flush()
		return t.csv.Error()
	}
	end := "\n]\n"
	if t.rows == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(t.out, end)
	return err
}

// csvSafe keeps a spreadsheet from reading free text (an order reference)
// as a formula.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+@\t\r", rune(s[0])) || strings.HasPrefix(s, "-") && !isNumber(s) {
		return "'" + s
	}
	return s
}

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}
