package ledger_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
)

// idemStore is a migrated store with client acme, and its URL.
func idemStore(t *testing.T, timeout time.Duration) (*ledger.Store, string) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	if err := ledger.Migrate(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	s, err := ledger.Open(t.Context(), url, ledger.Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.UpsertClient(t.Context(), ledger.Grant{ClientID: "acme", AllocatedHours: 1, Source: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return s, url
}

func record(body string) ledger.MetricsRecord {
	return ledger.MetricsRecord{RequestSHA256: sha256.Sum256([]byte(body)), Metrics: []byte(`{"m":"` + body + `"}`)}
}

// TestSaveMetricsReplayWritesNothing: a replay or a conflict reads the record
// that holds the key; it neither writes a new version of its row (xmin
// stays) nor waits for a lock on it.
func TestSaveMetricsReplayWritesNothing(t *testing.T) {
	s, url := idemStore(t, 2*time.Second)
	ctx := t.Context()
	first := record("a")
	held, stored, err := s.SaveMetrics(ctx, "acme", "key-0000000000001", first, time.Now())
	if err != nil || !stored || string(held.Metrics) != string(first.Metrics) || held.RequestSHA256 != first.RequestSHA256 {
		t.Fatalf("first save: %+v, %v, %v", held, stored, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	xmin := func() string {
		t.Helper()
		var x string
		if err := conn.QueryRow(ctx, `SELECT xmin::text FROM metrics_requests WHERE idempotency_key = 'key-0000000000001'`).Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	before := xmin()

	// Another transaction holds the row: a replay must not wait for it.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM metrics_requests WHERE idempotency_key = 'key-0000000000001' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		rec  ledger.MetricsRecord
	}{
		{"replay", first},
		{"conflict", record("b")},
	} {
		held, stored, err := s.SaveMetrics(ctx, "acme", "key-0000000000001", tt.rec, time.Now())
		if err != nil || stored || string(held.Metrics) != string(first.Metrics) || held.RequestSHA256 != first.RequestSHA256 {
			t.Errorf("%s with the row locked: %s, stored %v, %v; want the first record, not stored", tt.name, held.Metrics, stored, err)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if after := xmin(); after != before {
		t.Errorf("xmin of the record went from %s to %s: a replay wrote a new version of the row", before, after)
	}
}

// TestSaveMetricsConcurrently: concurrent saves under one key store exactly
// one record, and every other call gets that record back.
func TestSaveMetricsConcurrently(t *testing.T) {
	s, _ := idemStore(t, 10*time.Second)
	const n = 16
	var wg sync.WaitGroup
	stored := make([]bool, n)
	held := make([]ledger.MetricsRecord, n)
	for i := range n {
		wg.Go(func() {
			var err error
			held[i], stored[i], err = s.SaveMetrics(t.Context(), "acme", "key-concurrent-01", record(fmt.Sprint(i%2)), time.Now())
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	winners := 0
	for i := range n {
		if stored[i] {
			winners++
		}
		if held[i].RequestSHA256 != held[0].RequestSHA256 || string(held[i].Metrics) != string(held[0].Metrics) {
			t.Errorf("call %d got record %s, call 0 %s", i, held[i].Metrics, held[0].Metrics)
		}
	}
	if winners != 1 {
		t.Errorf("%d of %d concurrent saves stored a record, want 1", winners, n)
	}
}
