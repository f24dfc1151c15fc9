package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	evalapi "github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/logtest"
	"github.com/evalmeter/evalmeter/internal/openapitest"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/server"
)

// Authorization modes of FuzzHandler.
const (
	authNone       = iota
	authKey        // a valid API key
	authToken      // a valid session token
	authExpiredKey // the key of an agreement past its valid_until
	authBearer     // Bearer and the fuzzed value
	authRaw        // the fuzzed value as the whole header
	authModes
)

// Body framing modes of FuzzHandler: how Content-Length relates to the body.
const (
	framingExact   = iota // Content-Length: len(body)
	framingChunked        // Transfer-Encoding: chunked
	framingShort          // Content-Length above len(body): the body ends early
	framingLong           // Content-Length below len(body): the rest is not read
	framingNone           // no Content-Length: no body
	framingModes
)

// FuzzHandler drives the whole API handler, on a real PostgreSQL, with
// random methods, paths, query strings, credentials, Idempotency-Keys,
// content types, body framings and bodies. Every request is one that
// net/http could hand the handler (it is parsed from the wire form by
// http.ReadRequest; what that refuses never reaches the handler). Every
// answer must be a status api/openapi.yaml allows for the operation (404
// for another path, 405 for another method), conform to the document, carry
// a valid error envelope from 400 up, and never be a 500 or a panic.
func FuzzHandler(f *testing.F) {
	fx := newFuzzFixture(f)

	for _, seed := range []struct {
		method, path, query string
		auth                uint8
		authValue, idemKey  string
		contentType         string
		framing             uint8
		body                []byte
	}{
		{"GET", "/api/svc/v1/schema", "", authKey, "", "", "", framingNone, nil},
		{"GET", "/api/svc/v1/usage", "", authKey, "", "", "", framingNone, nil},
		{"GET", "/api/svc/v1/usage", "", authExpiredKey, "", "", "", framingNone, nil},
		{"POST", "/api/svc/v1/sessions", "", authKey, "", "fuzz-seed-session-0001", "", framingNone, nil},
		{"POST", "/api/svc/v1/sessions", "", authKey, "", `"fuzz-seed-session-0002"`, "", framingExact, []byte("{}")},
		{"POST", "/api/svc/v1/metrics", "", authToken, "", "fuzz-seed-metrics-0001", "application/json", framingExact, exampleBody},
		{"POST", "/api/svc/v1/metrics", "", authToken, "", "fuzz-seed-metrics-0001", "application/json", framingChunked, exampleBody},
		{"POST", "/api/svc/v1/metrics", "", authToken, "", "fuzz-seed-metrics-0002", "application/json; charset=utf-8", framingShort, exampleBody},
		{"POST", "/api/svc/v1/metrics", "", authToken, "", "fuzz-seed-metrics-0003", "application/json", framingLong, exampleBody},
		{"POST", "/api/svc/v1/metrics", "", authToken, "", "fuzz-seed-metrics-0004", "text/plain", framingExact, exampleBody},
		{"POST", "/api/svc/v1/metrics", "", authToken, "", "fuzz-seed-metrics-0005", "application/json", framingExact, []byte(`{"run_id":"r","cases":[{"case_id":"a","status":"pass","latency_ms":1,"prompt":"x"}]}`)},
		{"POST", "/api/svc/v1/metrics", "", authToken, "", "fuzz-seed-metrics-0006", "application/json", framingExact, []byte(`{"run_id":`)},
		{"POST", "/api/svc/v1/metrics", "debug=1", authToken, "", "fuzz-seed-metrics-0007", "application/json", framingExact, exampleBody},
		{"POST", "/api/svc/v1/metrics", "", authBearer, "evs_" + strings.Repeat("A", 59), "fuzz-seed-metrics-0008", "application/json", framingExact, exampleBody},
		{"POST", "/api/svc/v1/metrics", "", authKey, "", "fuzz-seed-metrics-0009", "application/json", framingExact, exampleBody},
		{"GET", "/api/svc/v1/metrics", "", authToken, "", "", "", framingNone, nil},
		{"DELETE", "/api/svc/v1/usage", "", authKey, "", "", "", framingNone, nil},
		{"GET", "/api/svc/v1//usage", "", authKey, "", "", "", framingNone, nil},
		{"GET", "/", "", authNone, "", "", "", framingNone, nil},
		{"GET", "/api/svc/v1/%75sage", "", authKey, "", "", "", framingNone, nil},
		{"GET", "/api/svc/v1%2Fusage", "", authKey, "", "", "", framingNone, nil},
		{"GET", "/api/svc/v1/usage", "", authRaw, "Basic YTpi", "", "", framingNone, nil},
		{"GET", "/api/svc/v1/usage", "", authBearer, "evk_" + strings.Repeat("*", 43), "", "", framingNone, nil},
		{"POST", "/api/svc/v1/sessions", "", authKey, "", "short", "", framingNone, nil},
		{"POST", "/api/svc/v1/sessions", "", authKey, "", "fuzz-seed-session-0003\r\nIdempotency-Key: fuzz-seed-session-0004", "", framingNone, nil},
		{"HEAD", "/api/svc/v1/schema", "", authKey, "", "", "", framingNone, nil},
		{"GET", "/.well-known/evalmeter/receipt-keys.json", "", authNone, "", "", "", framingNone, nil},
		{"OPTIONS", "*", "", authNone, "", "", "", framingNone, nil},
	} {
		f.Add(seed.method, seed.path, seed.query, seed.auth, seed.authValue, seed.idemKey, seed.contentType, seed.framing, seed.body)
	}

	f.Fuzz(func(t *testing.T, method, path, query string, auth uint8, authValue, idemKey, contentType string, framing uint8, body []byte) {
		req, ok := fx.request(method, path, query, auth, authValue, idemKey, contentType, framing, body)
		if !ok {
			return // net/http would refuse it before the handler
		}
		fx.logs.Reset()
		rec := httptest.NewRecorder()
		fx.handler.ServeHTTP(rec, req)
		if err := fx.check(req, rec.Result()); err != nil {
			t.Errorf("%s %s (Authorization mode %d, framing %d, %d body bytes): %v\nserver log:\n%s",
				req.Method, req.RequestURI, auth%authModes, framing%framingModes, len(body), err, fx.logs.String())
		}
	})
}

// fuzzFixture is what FuzzHandler sets up once per process (a fuzz worker
// is a process of its own): a database, an API handler and credentials.
type fuzzFixture struct {
	handler                http.Handler
	key, expiredKey, token string
	logs                   *logtest.Buffer
	statuses               map[string]map[string][]int // path → method → the statuses the document allows
	contract               *openapitest.Validator
}

func newFuzzFixture(f *testing.F) *fuzzFixture {
	ctx := context.Background()
	store := openLedger(f, pgtest.NewDatabase(f), ledger.Options{Timeout: 10 * time.Second, MaxConns: 4})
	tokens := mustSigner(f, 'f')
	now := newClock().Now // never advances: the session stays open
	fx := &fuzzFixture{logs: &logtest.Buffer{}}
	srv, err := server.New(server.Config{Ledger: store, Tokens: tokens, Now: now, Random: rand.Reader,
		Logger: slog.New(slog.NewJSONHandler(fx.logs, nil))})
	if err != nil {
		f.Fatal(err)
	}
	fx.handler = srv.Handler()

	grant := func(clientID string, validUntil *time.Time) string {
		if _, err := store.UpsertClient(ctx, ledger.Grant{ClientID: clientID, AllocatedHours: 1 << 20, ValidUntil: validUntil, Source: "fuzz"}, now()); err != nil {
			f.Fatal(err)
		}
		key, err := credential.NewAPIKey(rand.Reader)
		if err != nil {
			f.Fatal(err)
		}
		hash, _ := credential.HashAPIKey(key)
		if _, err := store.SetKey(ctx, clientID, hash, now(), 0); err != nil {
			f.Fatal(err)
		}
		return key
	}
	fx.key = grant("acme", nil)
	past := now().Add(-time.Hour)
	fx.expiredKey = grant("gone", &past)
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/api/svc/v1/sessions", nil)
	r.Header.Set("Authorization", "Bearer "+fx.key)
	r.Header.Set("Idempotency-Key", "fuzz-fixture-session")
	fx.handler.ServeHTTP(rec, r)
	var opened evalapi.SessionEnvelope
	if err := json.Unmarshal(rec.Body.Bytes(), &opened); err != nil || rec.Code != http.StatusCreated {
		f.Fatalf("opening the fixture's session: %d %s", rec.Code, rec.Body)
	}
	fx.token = opened.Session.Token

	if fx.statuses, err = documentedStatuses(); err != nil {
		f.Fatal(err)
	}
	if fx.contract, err = openapitest.NewValidator(); err != nil {
		f.Fatal(err)
	}
	return fx
}

// request builds the request net/http would hand the handler for these
// inputs, by parsing its wire form; false when net/http would refuse it.
func (fx *fuzzFixture) request(method, path, query string, auth uint8, authValue, idemKey, contentType string, framing uint8, body []byte) (*http.Request, bool) {
	if method == "" {
		method = "GET"
	}
	target := path
	if query != "" {
		target += "?" + query
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: evalmeter.test\r\n", method, target)
	switch auth % authModes {
	case authKey:
		b.WriteString("Authorization: Bearer " + fx.key + "\r\n")
	case authToken:
		b.WriteString("Authorization: Bearer " + fx.token + "\r\n")
	case authExpiredKey:
		b.WriteString("Authorization: Bearer " + fx.expiredKey + "\r\n")
	case authBearer:
		b.WriteString("Authorization: Bearer " + authValue + "\r\n")
	case authRaw:
		b.WriteString("Authorization: " + authValue + "\r\n")
	}
	if idemKey != "" {
		b.WriteString("Idempotency-Key: " + idemKey + "\r\n")
	}
	if contentType != "" {
		b.WriteString("Content-Type: " + contentType + "\r\n")
	}
	switch framing % framingModes {
	case framingExact:
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
		b.Write(body)
	case framingChunked:
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		if len(body) > 0 {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(body), body)
		}
		b.WriteString("0\r\n\r\n")
	case framingShort:
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body)+1+len(body)%7)
		b.Write(body)
	case framingLong:
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body)/2)
		b.Write(body)
	case framingNone:
		b.WriteString("\r\n")
	}
	req, err := http.ReadRequest(bufio.NewReader(&b))
	if err != nil {
		return nil, false
	}
	return req, true
}

// check reports what is wrong with resp as the answer to req.
func (fx *fuzzFixture) check(req *http.Request, resp *http.Response) error {
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	status := resp.StatusCode
	if status >= 500 && status != http.StatusServiceUnavailable {
		return fmt.Errorf("%d %s", status, body)
	}
	// The router matches the path as sent, before any decoding.
	methods, known := fx.statuses[req.URL.EscapedPath()]
	allowed, declared := methods[req.Method]
	switch {
	case !known:
		allowed = []int{http.StatusNotFound}
	case !declared:
		allowed = []int{http.StatusMethodNotAllowed}
	}
	if !slices.Contains(allowed, status) {
		return fmt.Errorf("status %d, want one of %v: %s", status, allowed, body)
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"} {
		if got := resp.Header.Get(k); got != want {
			return fmt.Errorf("%d with %s %q, want %q", status, k, got, want)
		}
	}
	if status >= 400 {
		var env evalapi.ErrorEnvelope
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&env); err != nil || dec.More() || env.Error.Message == "" ||
			env.Error.Status() != status || bytes.Contains(body, []byte(`"field":""`)) {
			return fmt.Errorf("%d without a valid error envelope of its status (%v): %s", status, err, body)
		}
	}
	if status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
		return fmt.Errorf("405 without Allow")
	}
	if known && declared {
		if err := fx.contract.Response(req, resp); err != nil {
			return err
		}
	}
	return nil
}

// documentedStatuses reads api/openapi.yaml: the statuses each operation
// declares. (api's tests tie each error code to its status and to the
// document's enum.)
func documentedStatuses() (map[string]map[string][]int, error) {
	var doc struct {
		Paths map[string]map[string]struct{ Responses map[string]any } `json:"paths"`
	}
	if err := yaml.Unmarshal(evalapi.OpenAPI, &doc); err != nil {
		return nil, fmt.Errorf("api/openapi.yaml: %w", err)
	}
	out := map[string]map[string][]int{}
	for path, ops := range doc.Paths {
		out[path] = map[string][]int{}
		for method, op := range ops {
			for code := range op.Responses {
				n, err := strconv.Atoi(code)
				if err != nil {
					return nil, fmt.Errorf("api/openapi.yaml: %s %s: response %q is not a status", method, path, code)
				}
				out[path][strings.ToUpper(method)] = append(out[path][strings.ToUpper(method)], n)
			}
		}
	}
	if len(out) != 5 {
		return nil, fmt.Errorf("api/openapi.yaml: %d paths, want 5 (the four operations and the receipt keys)", len(out))
	}
	return out, nil
}
