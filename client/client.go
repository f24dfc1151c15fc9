// Package client is a Go client of the evalmeter API (api/openapi.yaml): the
// schema, sessions, metrics and usage operations, typed, with the error
// envelope as *Error and bounded retries of what is safe to retry.
//
//	c, err := client.New("https://evalmeter.example.com", os.Getenv("EVALMETER_API_KEY"))
//	sess, err := c.OpenSession(ctx, client.NewIdempotencyKey())   // spends one credit
//	res, err := c.PostMetrics(ctx, sess.Token, key, body)
//
// Both POST operations carry an Idempotency-Key, so a retry after a lost
// answer replays the first outcome instead of spending or computing twice.
// That is why the client retries them.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/evalmeter/evalmeter/api"

	"github.com/evalmeter/evalmeter/receipt"
)

// maxResponseBytes bounds what is read of a response; the largest, the
// schema document, is about 10 KB.
const maxResponseBytes = 1 << 20

// Client calls one evalmeter API with one API key. Its methods are safe for
// concurrent use.
type Client struct {
	base   string // scheme://host[/prefix], without api.Prefix
	apiKey string

	// HTTPClient sends the requests; New sets one with a 30 s timeout.
	HTTPClient *http.Client
	// Retry bounds the retries of 502, 503, 504 and transport failures.
	Retry Retry
}

// Retry is a retry policy: exponential backoff with jitter, at least the
// server's Retry-After.
type Retry struct {
	// Attempts is the most requests one call sends, the first included.
	Attempts int
	// MinBackoff is the first wait; it doubles up to MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a longer one ends the call.
	MaxRetryAfter time.Duration
	// Sleep waits d or until ctx ends; nil is a timer. Tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Notify, when set, is told of each retry before its wait.
	Notify func(err error, wait time.Duration)
}

// DefaultRetry is the policy New sets: up to 6 attempts over about 30 s.
var DefaultRetry = Retry{Attempts: 6, MinBackoff: 500 * time.Millisecond, MaxBackoff: 10 * time.Second, MaxRetryAfter: time.Minute}

// New returns a client of the API at baseURL (https://host, or with the path
// under which the API is mounted; a trailing /api/svc/v1 is accepted). It
// refuses plain http except to a loopback address: the API key is a bearer
// credential.
func New(baseURL, apiKey string) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("base URL %q: give the API's address, e.g. https://evalmeter.example.com", baseURL)
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return nil, fmt.Errorf("base URL %q: use https; credentials travel in plain text over http (allowed only to localhost)", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("base URL %q: remove the query, fragment or user information", baseURL)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), api.Prefix)
	return &Client{
		base:       strings.TrimSuffix(u.String(), "/"),
		apiKey:     apiKey,
		HTTPClient: &http.Client{Timeout: 30 * time.Second},
		Retry:      DefaultRetry,
	}, nil
}

// BaseURL is the normalised base URL: without a trailing slash or api.Prefix.
func (c *Client) BaseURL() string { return c.base }

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Session is an open session.
type Session struct {
	api.Session
	// Replay is true when the answer replays an earlier opening with the
	// same Idempotency-Key: no credit was spent.
	Replay bool
}

// Usage is the client's credit figures.
type Usage struct {
	api.Usage
	// LowCreditThreshold is set when the remaining hours are at or below
	// the threshold the operator set for this client: time to ask for more.
	LowCreditThreshold *int
}

// MetricsResult is the answer to a metrics request.
type MetricsResult struct {
	Metrics api.Metrics
	// Replay is true when the service replayed the stored result of an
	// earlier request with the same Idempotency-Key and body.
	Replay bool
	// Body is the response body as the service sent it.
	Body []byte
	// Receipt is the response whole, with the request it answers: what a
	// third party checks with evalmeter verify when the service signed it.
	Receipt *receipt.File
}

// Schema returns the schema document. It spends no credit.
func (c *Client) Schema(ctx context.Context) (json.RawMessage, error) {
	resp, err := c.do(ctx, http.MethodGet, api.PathSchema, c.apiKey, "", nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(resp.body), nil
}

// Usage returns the client's credit figures. It spends no credit.
func (c *Client) Usage(ctx context.Context) (*Usage, error) {
	resp, err := c.do(ctx, http.MethodGet, api.PathUsage, c.apiKey, "", nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var env api.UsageEnvelope
	if err := decode(resp.body, &env); err != nil || env.Usage.ClientID == "" {
		return nil, fmt.Errorf("usage: unexpected answer from %s: %v", c.base, err)
	}
	u := &Usage{Usage: env.Usage}
	var remaining, threshold int
	if _, err := fmt.Sscanf(resp.header.Get(api.HeaderLowCredit), "remaining=%d, threshold=%d", &remaining, &threshold); err == nil {
		u.LowCreditThreshold = &threshold
	}
	return u, nil
}

// OpenSession opens a session: one evaluation-hour credit and a 60-minute
// window. Calling it again with the same idempotencyKey returns the same
// session without spending another credit, so keep the key until the answer
// has arrived.
func (c *Client) OpenSession(ctx context.Context, idempotencyKey string) (*Session, error) {
	resp, err := c.do(ctx, http.MethodPost, api.PathSessions, c.apiKey, idempotencyKey, nil, http.StatusCreated)
	if err != nil {
		return nil, err
	}
	var env api.SessionEnvelope
	if err := decode(resp.body, &env); err != nil || env.Session.Token == "" {
		return nil, fmt.Errorf("sessions: unexpected answer from %s: %v", c.base, err)
	}
	return &Session{Session: env.Session, Replay: env.IdempotentReplay}, nil
}

// PostMetrics posts a metrics request with a session's
// token. The same idempotencyKey with the same request replays the result.
func (c *Client) PostMetrics(ctx context.Context, token, idempotencyKey string, request []byte) (*MetricsResult, error) {
	resp, err := c.do(ctx, http.MethodPost, api.PathMetrics, token, idempotencyKey, request, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var env api.MetricsEnvelope
	if err := decode(resp.body, &env); err != nil || env.Metrics.SchemaVersion == "" {
		return nil, fmt.Errorf("metrics: unexpected answer from %s: %v", c.base, err)
	}
	return &MetricsResult{Metrics: env.Metrics, Replay: env.IdempotentReplay, Body: resp.body,
		Receipt: receipt.NewFile(http.StatusOK, resp.header, resp.body, resp.method, resp.target)}, nil
}

// NewIdempotencyKey returns a random key for an operation that must happen once.
func NewIdempotencyKey() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	return "evalmeter-" + hex.EncodeToString(b)
}

func decode(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	return d.Decode(v)
}

// do sends one operation, retrying per c.Retry, and returns the body of the
// wanted status or an error: *Error for an answer of the service.
// response is an answer with the wanted status.
type response struct {
	body   []byte
	header http.Header
	// method and target are those of the request answered (after any
	// redirect): what a receipt's signature covers.
	method, target string
}

func (c *Client) do(ctx context.Context, method, path, bearer, idemKey string, body []byte, want int) (*response, error) {
	policy := c.Retry
	if policy.Attempts < 1 {
		policy.Attempts = 1
	}
	sleep := policy.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	backoff := policy.MinBackoff
	for attempt := 1; ; attempt++ {
		resp, err := c.once(ctx, method, path, bearer, idemKey, body, want)
		if err == nil {
			return resp, nil
		}
		wait, retry := retryable(err)
		if !retry || attempt >= policy.Attempts || ctx.Err() != nil {
			return nil, err
		}
		if wait > policy.MaxRetryAfter {
			return nil, err
		}
		// Equal jitter: half the backoff, plus up to as much again at random,
		// so that clients that failed together do not retry together.
		jittered := backoff/2 + mrand.N(backoff/2+1)
		wait = max(wait, jittered)
		if policy.Notify != nil {
			policy.Notify(err, wait)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
		backoff = min(2*backoff, policy.MaxBackoff)
	}
}

func (c *Client) once(ctx context.Context, method, path, bearer, idemKey string, body []byte, want int) (*response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set(api.HeaderIdempotencyKey, idemKey)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, &transportError{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, &transportError{err: err}
	}
	if len(data) > maxResponseBytes {
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", method, path, maxResponseBytes)
	}
	if resp.StatusCode == want {
		return &response{body: data, header: resp.Header, method: resp.Request.Method, target: resp.Request.URL.String()}, nil
	}
	return nil, newError(resp, data)
}

// transportError is a request that got no answer: retried.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// retryable reports whether err may be retried, and the least wait the
// server asked for.
func retryable(err error) (time.Duration, bool) {
	var e *Error
	if errors.As(err, &e) {
		switch e.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return e.RetryAfter, true
		}
		return 0, false
	}
	var te *transportError
	if !errors.As(err, &te) {
		return 0, false
	}
	// A certificate that does not verify will not verify the next time.
	var cert *tls.CertificateVerificationError
	return 0, !errors.As(err, &cert)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Error is an error answer of the service: its status and error envelope.
type Error struct {
	StatusCode int
	Code       string // e.g. credits_exhausted; "" when the answer had no envelope
	Message    string
	Field      string // the offending field of a 422, when named
	// RetryAfter is the wait the service asked for (503), 0 when none.
	RetryAfter time.Duration
	RequestID  string // X-Request-Id, for the operator's logs
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", e.StatusCode)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Field != "" {
		b.WriteString(" (" + e.Field + ")")
	}
	b.WriteString(": " + e.Message)
	if e.RequestID != "" {
		b.WriteString(" [request " + e.RequestID + "]")
	}
	return b.String()
}

func newError(resp *http.Response, body []byte) *Error {
	e := &Error{StatusCode: resp.StatusCode, RequestID: resp.Header.Get(api.HeaderRequestID)}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	var env api.ErrorEnvelope
	if json.Unmarshal(body, &env) == nil && env.Error.Code != "" {
		e.Code, e.Message, e.Field = env.Error.Code, env.Error.Message, env.Error.Field
	} else {
		e.Message = fmt.Sprintf("HTTP %s without an evalmeter error body (a proxy in between?)", resp.Status)
	}
	return e
}
