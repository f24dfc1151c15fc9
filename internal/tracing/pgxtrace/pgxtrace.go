// Package pgxtrace gives pgx queries OpenTelemetry spans that never hold a
// query's arguments: the ledger's arguments are API key hashes, session ids
// and idempotency keys.
//
// It is apart from package tracing so that the ledger does not depend on
// the exporters.
package pgxtrace

import (
	"context"
	"database/sql"
	"errors"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// New returns a pgx.QueryTracer that gives each query run under a recording
// span (a traced request) a child span "query SELECT" (or INSERT, ...) with
// the SQL text, which holds placeholders ($1) and never a value. Queries
// outside a request (pruning, pings) get no span.
//
// otelpgx records no arguments unless asked (WithIncludeQueryParameters,
// never used here). Errors are another way in: pgx's encoding errors print
// the argument (%#v) and PostgreSQL's messages may quote an input value, so
// a span records a failed query's SQLSTATE, never its message.
func New(tp trace.TracerProvider) pgx.QueryTracer {
	return tracer{otelpgx.NewTracer(
		otelpgx.WithTracerProvider(tp),
		// The API's Prometheus metrics already time requests and the pool.
		otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()),
		// The SQL text is an attribute; as a span name it is a page long.
		otelpgx.WithTrimSQLInSpanName(),
	)}
}

// tracer is otelpgx's query and batch tracers (the ledger sends a batch to
// open a client's waiting sessions together), with errors scrubbed. Its
// copy, prepare, connect and acquire tracing would record errors unscrubbed.
type tracer struct{ otel *otelpgx.Tracer }

func (t tracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return t.otel.TraceQueryStart(ctx, conn, data)
}

func (t tracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	data.Err = scrub(data.Err)
	t.otel.TraceQueryEnd(ctx, conn, data)
}

func (t tracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	return t.otel.TraceBatchStart(ctx, conn, data)
}

func (t tracer) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	data.Err = scrub(data.Err)
	t.otel.TraceBatchQuery(ctx, conn, data)
}

func (t tracer) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	data.Err = scrub(data.Err)
	t.otel.TraceBatchEnd(ctx, conn, data)
}

// errWithheld stands for an error whose text a span must not record.
var errWithheld = errors.New("the query failed; its error text is withheld from traces, as it may quote an argument (the API's log has it)")

// scrub returns what of a query's error a span may record: a PostgreSQL
// error's severity and SQLSTATE, a timeout or cancellation as such, "no
// rows", and errWithheld for anything else.
func scrub(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return sql.ErrNoRows // no failure: otelpgx records none
	case errors.As(err, &pgErr):
		return &pgconn.PgError{Severity: pgErr.Severity, Code: pgErr.Code, Message: "message withheld from traces"}
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return context.Canceled
	default:
		return errWithheld
	}
}
