package pgxtrace_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/internal/tracing/pgxtrace"
	"github.com/evalmeter/evalmeter/internal/tracing/tracingtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestNoArgumentInSpans runs queries whose argument is a secret through a
// real PostgreSQL: as a value, in a PostgreSQL error's message and in a pgx
// encoding error. Each gets a span with its SQL under the caller's; the
// secret is in none of them, in any form.
func TestNoArgumentInSpans(t *testing.T) {
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	cfg, err := pgx.ParseConfig(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tracer = pgxtrace.New(tp)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	b := make([]byte, 16)
	rand.Read(b)
	secret := "secret-" + hex.EncodeToString(b)
	hash := sha256.Sum256([]byte(secret))

	// Outside a traced request: no span at all.
	if _, err := conn.Exec(ctx, `SELECT $1::text`, secret); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans for a query without a traced caller, want none", n)
	}

	tests := []struct {
		name      string
		sql       string
		arg       any
		wantState string // pgx.sql_state; "" for none
		wantError bool
	}{
		{name: "text value", sql: `SELECT $1::text`, arg: secret},
		{name: "hash as bytea", sql: `SELECT $1::bytea`, arg: hash[:]},
		// PostgreSQL quotes the input it cannot parse.
		{name: "PostgreSQL error quoting the value", sql: `SELECT $1::text::uuid`, arg: secret, wantState: "22P02", wantError: true},
		// pgx prints the value it cannot encode (%#v).
		{name: "pgx encoding error", sql: `SELECT $1::int`, arg: struct{ Key string }{secret}, wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec.Reset()
			parentCtx, parent := tp.Tracer("test").Start(ctx, "request")
			_, err := conn.Exec(parentCtx, tt.sql, tt.arg)
			parent.End()
			checkNoSecret(t, rec.Ended(), secret, hash[:])
			if (err != nil) != tt.wantError {
				t.Fatalf("Exec: %v, want an error: %t", err, tt.wantError)
			}
			// The query's error, as pgx returns it, quotes the secret: the
			// case tests what it means to.
			if tt.wantError && !strings.Contains(err.Error(), secret) {
				t.Fatalf("the error %q does not quote the argument; this case tests nothing", err)
			}

			spans := rec.Ended()
			if len(spans) != 2 {
				t.Fatalf("%d spans, want the query's and its parent's", len(spans))
			}
			query := spans[0]
			if query.Parent().SpanID() != parent.SpanContext().SpanID() || query.SpanContext().TraceID() != parent.SpanContext().TraceID() {
				t.Errorf("the query's span is not a child of the caller's")
			}
			if query.Name() != "query SELECT" || query.SpanKind() != trace.SpanKindClient {
				t.Errorf("span %q of kind %v, want \"query SELECT\", client", query.Name(), query.SpanKind())
			}
			attrs := map[string]string{}
			for _, kv := range query.Attributes() {
				attrs[string(kv.Key)] = kv.Value.Emit()
			}
			if attrs["db.query.text"] != tt.sql {
				t.Errorf("db.query.text %q, want %q", attrs["db.query.text"], tt.sql)
			}
			if attrs["pgx.sql_state"] != tt.wantState {
				t.Errorf("pgx.sql_state %q, want %q", attrs["pgx.sql_state"], tt.wantState)
			}
			if got := query.Status().Code == codes.Error; got != tt.wantError {
				t.Errorf("status %v, want an error: %t", query.Status(), tt.wantError)
			}
		})
		// The same in a batch: a span for the batch, none with the secret.
		t.Run(tt.name+" in a batch", func(t *testing.T) {
			rec.Reset()
			parentCtx, parent := tp.Tracer("test").Start(ctx, "request")
			b := &pgx.Batch{}
			b.Queue(tt.sql, tt.arg)
			err := conn.SendBatch(parentCtx, b).Close()
			parent.End()
			if (err != nil) != tt.wantError {
				t.Fatalf("SendBatch: %v, want an error: %t", err, tt.wantError)
			}
			spans := rec.Ended()
			if len(spans) < 2 {
				t.Fatalf("%d spans, want the batch's and its parent's", len(spans))
			}
			checkNoSecret(t, spans, secret, hash[:])
		})
	}
}

// checkNoSecret fails the test if a span holds the secret or its hash.
func checkNoSecret(t *testing.T, spans []sdktrace.ReadOnlySpan, secret string, hash []byte) {
	t.Helper()
	for _, s := range spans {
		for _, text := range tracingtest.SpanText(s) {
			for _, form := range secretForms(secret, hash) {
				if strings.Contains(text, form) {
					t.Errorf("span %q records the argument (as %q) in %q", s.Name(), form, text)
				}
			}
		}
	}
}

// secretForms are the ways a span could spell the secret or its hash.
func secretForms(secret string, hash []byte) []string {
	return []string{
		secret,
		hex.EncodeToString(hash),
		strings.ToUpper(hex.EncodeToString(hash)),
		string(hash),
		fmt.Sprint(hash),         // pgx.query.parameters' %+v of a []byte
		fmt.Sprintf("%#v", hash), // pgx's encoding errors
	}
}
