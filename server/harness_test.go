package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	evalapi "github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/logtest"
	"github.com/evalmeter/evalmeter/internal/openapitest"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/receipt"
	"github.com/evalmeter/evalmeter/server"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// clock is a settable clock, shared by every API instance of a test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// env is one database with any number of API instances on it.
type env struct {
	t      *testing.T
	url    string
	store  *ledger.Store
	clock  *clock
	logs   *logtest.Buffer
	tokens *credential.TokenSigner // of the API instances started after it is set
	// The receipt options of the API instances started after they are set.
	receipts    *receipt.Signer
	receiptKeys *receipt.KeySet
	publicURL   string
}

func newEnv(t *testing.T) *env {
	return newEnvAt(t, pgtest.NewDatabase(t))
}

func newEnvAt(t *testing.T, url string) *env {
	t.Helper()
	store := openLedger(t, url, ledger.Options{Timeout: 5 * time.Second})
	e := &env{t: t, url: url, store: store, clock: newClock(), logs: &logtest.Buffer{}, tokens: mustSigner(t, 'k')}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", e.logs)
		}
	})
	return e
}

// openLedger migrates the database at url and opens it until the test ends.
func openLedger(tb testing.TB, url string, opts ledger.Options) *ledger.Store {
	tb.Helper()
	if err := ledger.Migrate(context.Background(), url); err != nil {
		tb.Fatal(err)
	}
	store, err := ledger.Open(context.Background(), url, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(store.Close)
	return store
}

// mustSigner is a token signer whose key is 32 bytes of seed.
func mustSigner(tb testing.TB, seed byte) *credential.TokenSigner {
	tb.Helper()
	s, err := credential.NewTokenSigner(bytes.Repeat([]byte{seed}, 32))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// api starts an API instance over real loopback HTTP, with its own
// connection pool, as a separate replica would have.
func (e *env) api() *api {
	return e.apiWithTimeout(5 * time.Second)
}

// apiWithTimeout is api with its own bound on database statements.
func (e *env) apiWithTimeout(dbTimeout time.Duration) *api {
	e.t.Helper()
	return e.apiWith(ledger.Options{Timeout: dbTimeout})
}

// apiWith is api with its own pool options.
func (e *env) apiWith(opts ledger.Options) *api {
	e.t.Helper()
	srv := e.server(opts)
	ts := httptest.NewServer(srv.Handler())
	e.t.Cleanup(ts.Close)
	return &api{t: e.t, url: ts.URL, client: ts.Client()}
}

// server is an API instance with a pool of its own, not yet listening.
func (e *env) server(opts ledger.Options) *server.Server {
	e.t.Helper()
	store, err := ledger.Open(context.Background(), e.url, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(store.Close)
	srv, err := server.New(server.Config{
		Ledger: store, Tokens: e.tokens, Now: e.clock.Now, Random: rand.Reader,
		Logger:   slog.New(slog.NewJSONHandler(e.logs, nil)),
		Receipts: e.receipts, ReceiptKeys: e.receiptKeys, PublicURL: e.publicURL,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return srv
}

// grant provisions a client with hours of credit and returns its API key.
func (e *env) grant(clientID string, hours int, validUntil *time.Time) string {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.store.UpsertClient(ctx, ledger.Grant{ClientID: clientID, AllocatedHours: hours, ValidUntil: validUntil, Source: "test"}, e.clock.Now()); err != nil {
		e.t.Fatal(err)
	}
	key, err := credential.NewAPIKey(rand.Reader)
	if err != nil {
		e.t.Fatal(err)
	}
	hash, _ := credential.HashAPIKey(key)
	if _, err := e.store.SetKey(ctx, clientID, hash, e.clock.Now(), 0); err != nil {
		e.t.Fatal(err)
	}
	return key
}

// lockClient holds the client's row lock, as a concurrent transaction
// would, until the returned function is called.
func (e *env) lockClient(clientID string) (unlock func()) {
	e.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, `SELECT 1 FROM clients WHERE client_id = $1 FOR UPDATE`, clientID)
	}
	if err != nil {
		conn.Close(ctx)
		e.t.Fatal(err)
	}
	return func() {
		tx.Rollback(ctx)
		conn.Close(ctx)
	}
}

func (e *env) usage(clientID string) ledger.Usage {
	e.t.Helper()
	u, err := e.store.Usage(context.Background(), clientID, e.clock.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

type api struct {
	t      *testing.T
	url    string
	client *http.Client
}

// request is one HTTP request to the API.
type request struct {
	method  string
	path    string
	bearer  string
	idemKey string
	header  http.Header
	body    []byte
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (a *api) do(req request) response {
	a.t.Helper()
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	r, err := http.NewRequest(req.method, a.url+req.path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	for k, vs := range req.header {
		r.Header[k] = vs
	}
	if req.bearer != "" {
		r.Header.Set("Authorization", "Bearer "+req.bearer)
	}
	if req.idemKey != "" {
		r.Header.Set("Idempotency-Key", req.idemKey)
	}
	if _, set := req.header["Content-Type"]; !set && req.body != nil && req.path == "/api/svc/v1/metrics" {
		r.Header.Set("Content-Type", "application/json")
	}
	contractErr := openAPI(a.t).Request(r)
	resp, err := a.client.Do(r)
	if err != nil {
		a.t.Fatalf("%s %s: %v", req.method, req.path, err)
	}
	defer resp.Body.Close()
	// Every answer must be one the OpenAPI document declares, and no request
	// it forbids may succeed. 404 and 405 answer no operation of it.
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		if err := openAPI(a.t).Response(r, resp); err != nil {
			a.t.Errorf("%s %s: the response breaks api/openapi.yaml: %v", req.method, req.path, err)
		}
	}
	// Every answer of the API, success or error (TestResponseHeaders).
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		a.t.Errorf("%s %s: %d with X-Content-Type-Options %q, want nosniff", req.method, req.path, resp.StatusCode, got)
	}
	if contractErr != nil && resp.StatusCode < 300 {
		a.t.Errorf("%s %s: %d for a request api/openapi.yaml forbids: %v", req.method, req.path, resp.StatusCode, contractErr)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

var (
	validatorOnce sync.Once
	validator     *openapitest.Validator
	validatorErr  error
)

// openAPI is the checker of api/openapi.yaml, built once per test binary.
func openAPI(t *testing.T) *openapitest.Validator {
	t.Helper()
	validatorOnce.Do(func() { validator, validatorErr = openapitest.NewValidator() })
	if validatorErr != nil {
		t.Fatal(validatorErr)
	}
	return validator
}

func (a *api) openSession(key, idemKey string) (response, evalapi.SessionEnvelope) {
	a.t.Helper()
	resp := a.do(request{method: "POST", path: "/api/svc/v1/sessions", bearer: key, idemKey: idemKey})
	var env evalapi.SessionEnvelope
	if resp.status == http.StatusCreated {
		resp.decode(a.t, &env)
	}
	return resp, env
}

// mustOpenSession opens a session or fails the test.
func (a *api) mustOpenSession(key, idemKey string) evalapi.SessionEnvelope {
	a.t.Helper()
	resp, env := a.openSession(key, idemKey)
	if resp.status != http.StatusCreated {
		a.t.Fatalf("opening a session: %d %s", resp.status, resp.body)
	}
	return env
}

func (a *api) postMetrics(token, idemKey string, body []byte) response {
	a.t.Helper()
	return a.do(request{method: "POST", path: "/api/svc/v1/metrics", bearer: token, idemKey: idemKey, body: body})
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// errorCode checks the response is the error envelope and returns its code.
func (r response) errorCode(t *testing.T) string {
	t.Helper()
	var env evalapi.ErrorEnvelope
	r.decode(t, &env)
	if env.Error.Code == "" || env.Error.Message == "" {
		t.Fatalf("error envelope without code or message: %s", r.body)
	}
	if r.header.Get("Content-Type") != "application/json" || r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("error response headers: %v", r.header)
	}
	return env.Error.Code
}

// queryTracer is a pgx tracer that counts the queries a pool starts and
// finishes, and the connections that ran them.
type queryTracer struct {
	started, ended atomic.Int64
	mu             sync.Mutex
	conns          map[*pgx.Conn]bool
}

func (c *queryTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.started.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns == nil {
		c.conns = map[*pgx.Conn]bool{}
	}
	c.conns[conn] = true
	return ctx
}

func (c *queryTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {
	c.ended.Add(1)
}

// connections is how many connections ran queries.
func (c *queryTracer) connections() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

// idem makes a valid Idempotency-Key from a short name.
func idem(name string) string { return "test-" + name + strings.Repeat("0", max(0, 16-5-len(name))) }

var exampleBody = mustReadFile("../api/examples/metrics-request.json")

func mustReadFile(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return b
}
