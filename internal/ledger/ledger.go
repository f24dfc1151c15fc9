// Package ledger keeps evalmeter's strongly consistent state in PostgreSQL:
// clients and their credit allocations, API key hashes, sessions, the
// append-only credit events and the idempotency records of metrics
// requests (docs/design.md#9-the-ledger).
package ledger

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/evalmeter/evalmeter/internal/tracing/pgxtrace"
)

//go:embed migrations/*.sql
var migrations embed.FS

// DefaultTimeout bounds every statement, connection wait included.
const DefaultTimeout = 2 * time.Second

// Store is the ledger. Its methods are safe for concurrent use by any
// number of API replicas sharing one database.
type Store struct {
	pool    *pgxpool.Pool
	timeout time.Duration
	metrics *metricsWriter
	opens   *sessionOpener
	tracer  trace.Tracer // spans of statements written for several callers
}

// Options configure a Store's connection pool.
type Options struct {
	// Timeout bounds every statement, the wait for a connection included;
	// 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxConns bounds the pool: replicas × MaxConns must stay under
	// PostgreSQL's max_connections. 0 means pgx's default (the greater of 4
	// and the number of CPUs).
	MaxConns int32
	// Tracer, when set, sees every query (metrics, tests counting queries).
	Tracer pgx.QueryTracer
	// TracerProvider, when set, gives each query of a traced request a span
	// with its SQL, never its arguments (pgxtrace). Tracer still sees every
	// query.
	TracerProvider trace.TracerProvider
}

// Open connects to the database at url. It does not migrate.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if opts.MaxConns < 0 {
		return nil, fmt.Errorf("ledger: MaxConns %d is negative; use 0 for pgx's default", opts.MaxConns)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cfg.ConnConfig.ConnectTimeout = timeout
	// A wait for a lock ends before the caller's bound: PostgreSQL then
	// aborts the statement itself. A statement alone (OpenSession) would
	// otherwise commit once the lock came, after its caller had answered
	// 503. DATABASE_URL may set its own.
	if _, set := cfg.ConnConfig.RuntimeParams["lock_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["lock_timeout"] = strconv.FormatInt((timeout * 3 / 4).Milliseconds(), 10)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
		cfg.MinConns = min(cfg.MinConns, opts.MaxConns)
	}
	if cfg.ConnConfig.TLSConfig != nil {
		cfg.BeforeConnect = reloadTLS(url)
	}
	switch {
	case opts.TracerProvider != nil && opts.Tracer != nil:
		cfg.ConnConfig.Tracer = multitracer.New(pgxtrace.New(opts.TracerProvider), opts.Tracer)
	case opts.TracerProvider != nil:
		cfg.ConnConfig.Tracer = pgxtrace.New(opts.TracerProvider)
	case opts.Tracer != nil:
		cfg.ConnConfig.Tracer = opts.Tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	s := &Store{pool: pool, timeout: timeout, tracer: noop.NewTracerProvider().Tracer("")}
	if opts.TracerProvider != nil {
		s.tracer = opts.TracerProvider.Tracer("github.com/evalmeter/evalmeter/internal/ledger")
	}
	s.metrics = &metricsWriter{store: s}
	s.opens = &sessionOpener{store: s, waiting: map[string][]*sessionOpen{}}
	return s, nil
}

// reloadTLS gives each new connection the TLS settings of url parsed again,
// with sslrootcert (or PGSSLROOTCERT) and the client certificate read anew.
// pgx reads them once, but a CA can be renewed in place: CloudNativePG
// renews its own before it expires, and the kubelet updates the mounted
// file. A pod that kept the first one would fail every new connection once
// it expired.
func reloadTLS(url string) func(context.Context, *pgx.ConnConfig) error {
	return func(_ context.Context, cc *pgx.ConnConfig) error {
		fresh, err := pgconn.ParseConfig(url)
		if err != nil {
			return fmt.Errorf("DATABASE_URL's TLS files: %w", err)
		}
		cc.TLSConfig = fresh.TLSConfig
		if len(fresh.Fallbacks) == len(cc.Fallbacks) {
			for i, f := range fresh.Fallbacks {
				cc.Fallbacks[i].TLSConfig = f.TLSConfig
			}
		}
		return nil
	}
}

// PoolStat is a snapshot of the connection pool's statistics.
func (s *Store) PoolStat() *pgxpool.Stat { return s.pool.Stat() }

// Close waits for connections in use and closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that PostgreSQL answers within the statement timeout.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.pool.Ping(ctx)
}

// Migrate brings the schema at url up to date. A PostgreSQL advisory lock
// lets any number of processes call it at once. While PostgreSQL cannot be
// reached (it may be starting beside the service), Migrate waits for it until
// ctx ends; any other error, a refused password say, ends it at once.
func Migrate(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	if err := waitReachable(ctx, db); err != nil {
		return err
	}
	return migrate(ctx, db)
}

func waitReachable(ctx context.Context, db *sql.DB) error {
	delay := 100 * time.Millisecond
	for {
		err := db.PingContext(ctx)
		if err == nil || !unreachable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("PostgreSQL did not become reachable: %w", err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

func migrate(ctx context.Context, db *sql.DB) error {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	files, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("loading migrations: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	return nil
}

// bound gives ctx the statement timeout.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// startBatch starts the span of a statement run for the callers of batch,
// whose contexts ctxOf gives: a child of the first caller's span, linked to
// the others' spans, which are linked back to it, so that every caller's
// trace leads to the statement that did its work. No caller's cancellation
// reaches the span's context: the statement is every caller's.
func startBatch[T any](s *Store, name string, batch []T, ctxOf func(T) context.Context) (context.Context, trace.Span) {
	links := make([]trace.Link, 0, len(batch)-1)
	for _, c := range batch[1:] {
		links = append(links, trace.LinkFromContext(ctxOf(c)))
	}
	ctx, span := s.tracer.Start(context.WithoutCancel(ctxOf(batch[0])), name,
		trace.WithLinks(links...), trace.WithAttributes(attribute.Int("evalmeter.batch.size", len(batch))))
	for _, c := range batch[1:] {
		trace.SpanFromContext(ctxOf(c)).AddLink(trace.Link{SpanContext: span.SpanContext()})
	}
	return ctx, span
}
