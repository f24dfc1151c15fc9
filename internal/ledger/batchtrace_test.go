package ledger_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/polltest"
)

// TestBatchSpans: a statement run for several callers has a span of its
// own under the first caller's span, linked to the other callers' spans,
// which link back to it, and its queries' spans are under it. Without
// that, only the first caller's trace showed the statement that did its
// work.
func TestBatchSpans(t *testing.T) {
	const callers = 3
	now := time.Now()
	// setUp returns a traced store whose next statement of the kind tested
	// waits on a lock held until release is called.
	type setUp func(t *testing.T, s *ledger.Store, url string) (release func())
	for _, tc := range []struct {
		name   string // of the batch's span
		setUp  setUp
		call   func(ctx context.Context, s *ledger.Store, i int) error
		queued func(s *ledger.Store) int
	}{{
		name: "ledger.metrics_batch",
		setUp: func(t *testing.T, s *ledger.Store, url string) func() {
			sess := openSession(t, s, "acme", "sess_000000000000000000000001", now)
			// Both statements the writer runs at once wait.
			tx := holdInTx(t, url, `INSERT INTO metrics_requests (client_id, idempotency_key, request_sha256, metrics, created_at)
				SELECT 'acme', k, sha256(k::bytea), '{}', now() FROM unnest(ARRAY['held-key-00001', 'held-key-00002']) k`)
			var wg sync.WaitGroup
			for _, key := range []string{"held-key-00001", "held-key-00002"} {
				wg.Go(func() {
					if _, _, err := s.SaveMetrics(context.Background(), sess, key, record(key), now); err != nil {
						t.Errorf("held write: %v", err)
					}
				})
			}
			waitForLocks(t, url, "%unnest%", 2)
			return func() {
				if err := tx.Rollback(t.Context()); err != nil {
					t.Fatal(err)
				}
				wg.Wait()
			}
		},
		call: func(ctx context.Context, s *ledger.Store, i int) error {
			sess, err := s.Session(ctx, "sess_000000000000000000000001", now)
			if err != nil {
				return err
			}
			_, _, err = s.SaveMetrics(ctx, sess, fmt.Sprintf("traced-key-%05d", i), record(fmt.Sprint(i)), now)
			return err
		},
		queued: ledger.QueuedMetrics,
	}, {
		name: "ledger.session_batch",
		setUp: func(t *testing.T, s *ledger.Store, url string) func() {
			// The first open waits for the client's row.
			tx := holdInTx(t, url, `SELECT FROM clients WHERE client_id = 'acme' FOR UPDATE`)
			var wg sync.WaitGroup
			wg.Go(func() {
				if _, _, err := s.OpenSession(context.Background(), "first-open-000001", batchSession(0, now), "test"); err != nil {
					t.Errorf("first open: %v", err)
				}
			})
			waitForLocks(t, url, "%", 1)
			return func() {
				if err := tx.Rollback(t.Context()); err != nil {
					t.Fatal(err)
				}
				wg.Wait()
			}
		},
		call: func(ctx context.Context, s *ledger.Store, i int) error {
			_, _, err := s.OpenSession(ctx, fmt.Sprintf("traced-open-%05d", i), batchSession(i+1, now), "test")
			return err
		},
		queued: func(s *ledger.Store) int { return ledger.QueuedOpens(s, "acme") },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			s, url := batchStore(t, ledger.Options{Timeout: 20 * time.Second, TracerProvider: tp})
			if _, err := s.UpsertClient(t.Context(), ledger.Grant{ClientID: "acme", AllocatedHours: 10, Source: "test"}, now); err != nil {
				t.Fatal(err)
			}
			release := tc.setUp(t, s, url)

			var wg sync.WaitGroup
			spans := make([]trace.SpanContext, callers)
			for i := range callers {
				ctx, span := tp.Tracer("test").Start(t.Context(), fmt.Sprintf("caller-%d", i))
				spans[i] = span.SpanContext()
				wg.Go(func() {
					defer span.End()
					if err := tc.call(ctx, s, i); err != nil {
						t.Errorf("caller %d: %v", i, err)
					}
				})
			}
			polltest.Until(t, 20*time.Second, "every traced call queued", func() error {
				if n := tc.queued(s); n != callers {
					return fmt.Errorf("%d queued", n)
				}
				return nil
			})
			release()
			wg.Wait()
			checkBatchSpan(t, rec.Ended(), tc.name, spans)
		})
	}
}

func batchSession(n int, now time.Time) ledger.Session {
	return ledger.Session{ID: fmt.Sprintf("sess_%024x", 1000+n), ClientID: "acme", IssuedAt: now, ExpiresAt: now.Add(time.Hour), TokenKeyID: "k"}
}

// checkBatchSpan checks that one span named name served the callers: the
// child of one, linked to the others, which link back to it, and the parent
// of a query's span.
func checkBatchSpan(t *testing.T, ended []sdktrace.ReadOnlySpan, name string, callers []trace.SpanContext) {
	t.Helper()
	var batch sdktrace.ReadOnlySpan
	for _, s := range ended {
		if s.Name() == name && slices.Contains(s.Attributes(), attribute.Int("evalmeter.batch.size", len(callers))) {
			if batch != nil {
				t.Fatalf("two %s spans of %d callers", name, len(callers))
			}
			batch = s
		}
	}
	if batch == nil {
		t.Fatalf("no %s span with evalmeter.batch.size %d among %d spans", name, len(callers), len(ended))
	}
	first := slices.IndexFunc(callers, func(c trace.SpanContext) bool { return c.SpanID() == batch.Parent().SpanID() })
	if first < 0 {
		t.Fatalf("%s is under span %s, no caller's", name, batch.Parent().SpanID())
	}
	var linked []trace.SpanID
	for _, l := range batch.Links() {
		linked = append(linked, l.SpanContext.SpanID())
	}
	for i, c := range callers {
		if i == first {
			continue
		}
		if !slices.Contains(linked, c.SpanID()) {
			t.Errorf("%s has no link to caller %d", name, i)
		}
		j := slices.IndexFunc(ended, func(s sdktrace.ReadOnlySpan) bool { return s.SpanContext().SpanID() == c.SpanID() })
		if j < 0 {
			t.Fatalf("caller %d's span did not end", i)
		}
		if !slices.ContainsFunc(ended[j].Links(), func(l sdktrace.Link) bool { return l.SpanContext.SpanID() == batch.SpanContext().SpanID() }) {
			t.Errorf("caller %d's span has no link to %s", i, name)
		}
	}
	if len(linked) != len(callers)-1 {
		t.Errorf("%s has %d links, want %d", name, len(linked), len(callers)-1)
	}
	if !slices.ContainsFunc(ended, func(s sdktrace.ReadOnlySpan) bool { return s.Parent().SpanID() == batch.SpanContext().SpanID() }) {
		t.Errorf("no query's span is under %s", name)
	}
}
