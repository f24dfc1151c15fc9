// Package server is evalmeter's HTTP API (api/openapi.yaml): routing, middleware
// and four thin handlers over the metrics engine and the ledger.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/metrics"
	"github.com/evalmeter/evalmeter/receipt"
)

// AccessWindow is a session's length (docs/design.md#72-sessions-one-credit-60-minutes).
const AccessWindow = 60 * time.Minute

// MetricsRetention is how long a metrics result stays replayable.
const MetricsRetention = 24 * time.Hour

// Config is what the API needs. Now and Random are injected so tests can
// control time and identifiers.
type Config struct {
	Ledger   *ledger.Store
	Tokens   *credential.TokenSigner
	Now      func() time.Time
	Random   io.Reader
	Logger   *slog.Logger
	Registry prometheus.Registerer
	// TracerProvider, when set, gives each request a span named after its
	// route, and its log line the trace_id and span_id. nil: no tracing.
	TracerProvider trace.TracerProvider
	// Propagator reads a caller's trace context; nil: W3C tracecontext
	// and baggage.
	Propagator propagation.TextMapPropagator
	// TrustTraceContext makes a caller's traceparent the parent of its
	// request's span, sampled flag included: only where a proxy in front
	// sets it. Otherwise each request starts a new trace, linked to the
	// caller's span context, since anyone can send a traceparent.
	TrustTraceContext bool
	// Receipts, when set, signs every metrics response (RFC 9421), and
	// ReceiptKeys is the key set served at api.PathReceiptKeys: Receipts' key
	// and the retired ones. nil: responses are not signed.
	Receipts    *receipt.Signer
	ReceiptKeys *receipt.KeySet
	// PublicURL is the base URL clients use, e.g. https://evalmeter.example.com,
	// when it is not the request's own scheme and Host: the signed
	// @target-uri is under it.
	PublicURL string
}

// Server serves the API. Create it with New.
type Server struct {
	ledger    *ledger.Store
	tokens    *credential.TokenSigner
	now       func() time.Time
	random    io.Reader
	log       *slog.Logger
	telemetry *telemetry
	schema    []byte // the schema document, built once
	handler   http.Handler
	traced    bool         // Config.TracerProvider was set
	sessions  *sessionMemo // sessions read from the ledger
	bodies    sync.Pool    // of *[]byte holding metrics.MaxBodyBytes+1, for request bodies
	meters    sync.Pool    // of *metrics.Meter: a reused one reads a request without allocating
	receipts  *receipt.Signer
	// receiptKeys is the served JWK Set, marshaled once; nil without Receipts.
	receiptKeys []byte
	publicURL   string
}

// New builds the server; it fails only on a bad Config.
func New(cfg Config) (*Server, error) {
	if cfg.Ledger == nil || cfg.Tokens == nil || cfg.Now == nil || cfg.Random == nil || cfg.Logger == nil {
		return nil, errors.New("server: Config needs Ledger, Tokens, Now, Random and Logger")
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	t, err := newTelemetry(cfg.Registry)
	if err != nil {
		return nil, err
	}
	if err := cfg.Registry.Register(newPoolCollector(cfg.Ledger.PoolStat)); err != nil {
		return nil, err
	}
	schema, err := schemaDocument()
	if err != nil {
		return nil, err
	}
	var receiptKeys []byte
	if cfg.Receipts != nil {
		keys := cfg.ReceiptKeys
		if keys == nil {
			keys = receipt.NewKeySet(cfg.Receipts.Public())
		}
		if keys.Lookup(cfg.Receipts.KeyID()) == nil {
			return nil, errors.New("server: ReceiptKeys does not hold the key of Receipts")
		}
		if receiptKeys, err = json.Marshal(keys); err != nil {
			return nil, err
		}
	}
	s := &Server{
		receipts:    cfg.Receipts,
		receiptKeys: receiptKeys,
		publicURL:   strings.TrimRight(cfg.PublicURL, "/"),
		ledger:      cfg.Ledger,
		tokens:      cfg.Tokens,
		now:         cfg.Now,
		random:      cfg.Random,
		log:         cfg.Logger,
		telemetry:   t,
		schema:      schema,
		sessions:    newSessionMemo(),
	}
	s.bodies.New = func() any {
		b := make([]byte, metrics.MaxBodyBytes+1)
		return &b
	}
	s.meters.New = func() any { return new(metrics.Meter) }
	s.handler = s.routes()
	if cfg.TracerProvider != nil {
		s.traced = true
		s.handler = traced(s.handler, cfg.TracerProvider, cfg.Propagator, cfg.TrustTraceContext)
	}
	return s, nil
}

// Handler is the API's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	r := mux.NewRouter()
	// A path that is not exactly one of ours is a 404, not a redirect, and
	// not after decoding: /api/svc/v1%2Fusage is not /api/svc/v1/usage.
	r.SkipClean(true)
	r.UseEncodedPath()
	allowed := map[string]string{}
	route := func(name, method, path string, h handlerFunc) {
		allowed[path] = method
		r.Handle(path, s.endpoint(name, h)).Methods(method)
	}
	route("schema", http.MethodGet, api.PathSchema, s.getSchema)
	route("sessions", http.MethodPost, api.PathSessions, s.openSession)
	route("metrics", http.MethodPost, api.PathMetrics, s.postMetrics)
	route("usage", http.MethodGet, api.PathUsage, s.getUsage)
	// Outside /api/svc/v1 and with no credential: a verifier has no API key.
	route("receipt-keys", http.MethodGet, api.PathReceiptKeys, s.getReceiptKeys)

	r.NotFoundHandler = s.endpoint(routeUnmatched, func(w http.ResponseWriter, r *http.Request) error {
		return newError(api.CodeNotFound, "no such operation: the API serves "+api.PathSchema+", "+api.PathSessions+", "+api.PathMetrics+" and "+api.PathUsage)
	})
	r.MethodNotAllowedHandler = s.endpoint(routeUnmatched, func(w http.ResponseWriter, r *http.Request) error {
		e := newError(api.CodeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path)
		e.header = http.Header{"Allow": {allowed[r.URL.Path]}}
		return e
	})
	return s.middleware(r)
}

// HTTPServer returns the http.Server an API listener runs h with: every
// read, write and header bounded. errorLog may be nil.
func HTTPServer(h http.Handler, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second, // a 256 KiB body at 70 kbit/s
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          errorLog,
	}
}

// PruneMetrics deletes, every interval until ctx ends, the metrics
// results older than MetricsRetention. Every replica runs it; one at a
// time prunes.
func (s *Server) PruneMetrics(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.pruneOnce(ctx); err != nil {
			s.log.Warn("pruning metrics results", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) pruneOnce(ctx context.Context) error {
	n, busy, err := s.ledger.PruneMetrics(ctx, s.now().Add(-MetricsRetention), ledger.PruneBatch)
	s.telemetry.pruned.Add(float64(n))
	switch {
	case err != nil:
		s.telemetry.pruneRuns.WithLabelValues("error").Inc()
		return err
	case busy:
		// No stamp: whether the replica holding the lock succeeds is for
		// it to report, and the alert takes the freshest stamp of all.
		s.telemetry.pruneRuns.WithLabelValues("busy").Inc()
		s.log.Debug("another replica is pruning metrics results")
	default:
		s.telemetry.pruneRuns.WithLabelValues("ok").Inc()
		s.telemetry.pruneLastOK.Set(float64(s.now().Unix()))
		if n > 0 {
			s.log.Info("pruned metrics results", "count", n)
		}
	}
	return nil
}

func schemaDocument() ([]byte, error) {
	doc := api.SchemaDocument{
		SchemaVersion: metrics.SchemaVersion,
		Service:       "evalmeter",
		Purpose: "Deterministic aggregate metrics computed from structured observations of an AI-agent or " +
			"LLM-workflow run that the customer executes in its own environment.",
		AcceptedContent: "Structured, customer-reported observations only: per case a status, latency, token counts, " +
			"cost, tool check outcomes, boundary violation codes and trace step counts, as metrics_request describes.",
		ProhibitedContent: []string{
			"prompts",
			"model responses",
			"customer credentials in a payload",
			"commands or code to execute",
			"target URLs to call",
		},
		Limits: api.Limits{
			BodyBytes:           metrics.MaxBodyBytes,
			CasesPerRequest:     metrics.MaxCases,
			AccessWindowMinutes: int(AccessWindow / time.Minute),
		},
		MetricsRequest: api.MetricsRequestSchema,
	}
	doc.Operations.Schema = "GET " + api.PathSchema
	doc.Operations.Sessions = "POST " + api.PathSessions
	doc.Operations.Metrics = "POST " + api.PathMetrics
	doc.Operations.Usage = "GET " + api.PathUsage
	doc.Output.FullReport = "Not included. A human-reviewed analysis and a full report are a separate service outside this interface."
	return json.Marshal(doc)
}
