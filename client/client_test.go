package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	tests := []struct {
		in, base string // base "" when refused
	}{
		{"https://evalmeter.example.com", "https://evalmeter.example.com"},
		{"https://evalmeter.example.com/", "https://evalmeter.example.com"},
		{"https://evalmeter.example.com/api/svc/v1", "https://evalmeter.example.com"},
		{"https://example.com/evalmeter/api/svc/v1/", "https://example.com/evalmeter"},
		{"http://localhost:8080", "http://localhost:8080"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://[::1]:8080", "http://[::1]:8080"},
		{"http://evalmeter.example.com", ""}, // a key in plain text over the network
		{"evalmeter.example.com", ""},
		{"ftp://evalmeter.example.com", ""},
		{"https://evalmeter.example.com/?key=x", ""},
		{"https://user:pw@evalmeter.example.com", ""},
	}
	for _, tt := range tests {
		c, err := New(tt.in, "k")
		switch {
		case tt.base == "" && err == nil:
			t.Errorf("New(%q) accepted", tt.in)
		case tt.base != "" && err != nil:
			t.Errorf("New(%q): %v", tt.in, err)
		case tt.base != "" && c.BaseURL() != tt.base:
			t.Errorf("New(%q).BaseURL() = %q, want %q", tt.in, c.BaseURL(), tt.base)
		}
	}
}

// flaky answers with the given responses in turn, then 201 with a session.
type flaky struct {
	responses []func(w http.ResponseWriter)
	calls     atomic.Int32
	keys      []string
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(f.calls.Add(1)) - 1
	f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
	if n < len(f.responses) {
		f.responses[n](w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write([]byte(`{"session":{"id":"sess_000000000000000000000001","token":"evs_t","issued_at":"2026-11-22T10:00:00Z","expires_at":"2026-11-22T11:00:00Z","access_window_minutes":60,"hours_consumed":1},"idempotent_replay":true}`))
}

func unavailable(retryAfter string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("X-Request-Id", "req1")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":{"code":"service_unavailable","message":"the ledger is temporarily unavailable"}}`))
	}
}

// hangUp closes the connection without an answer: a transport failure.
func hangUp(w http.ResponseWriter) {
	conn, _, _ := w.(http.Hijacker).Hijack()
	conn.Close()
}

func status(code int, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.WriteHeader(code)
		w.Write([]byte(body))
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name      string
		responses []func(w http.ResponseWriter)
		calls     int
		waits     []time.Duration // least waits; jitter may add up to the backoff
		err       string          // in the error; "" for success
		code      string
	}{
		{name: "503 honours Retry-After", responses: []func(http.ResponseWriter){unavailable("3"), unavailable("")}, calls: 3, waits: []time.Duration{3 * time.Second, 500 * time.Millisecond}},
		{name: "connection lost", responses: []func(http.ResponseWriter){hangUp, hangUp}, calls: 3, waits: []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}},
		{name: "proxy 502 without envelope", responses: []func(http.ResponseWriter){status(502, "<html>bad gateway</html>")}, calls: 2},
		{name: "attempts bounded", responses: []func(http.ResponseWriter){unavailable("1"), unavailable("1"), unavailable("1"), unavailable("1")}, calls: 3, err: "service_unavailable", code: "service_unavailable"},
		{name: "Retry-After too long", responses: []func(http.ResponseWriter){unavailable("3600")}, calls: 1, err: "503", code: "service_unavailable"},
		{name: "402 is final", responses: []func(http.ResponseWriter){status(402, `{"error":{"code":"credits_exhausted","message":"no credit"}}`)}, calls: 1, err: "credits_exhausted", code: "credits_exhausted"},
		{name: "401 is final", responses: []func(http.ResponseWriter){status(401, `{"error":{"code":"unauthorized","message":"bad key"}}`)}, calls: 1, err: "401 unauthorized: bad key", code: "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &flaky{responses: tt.responses}
			srv := httptest.NewServer(f)
			defer srv.Close()
			c, err := New(srv.URL, "evk_test")
			if err != nil {
				t.Fatal(err)
			}
			var waits []time.Duration
			c.Retry = Retry{Attempts: 3, MinBackoff: 500 * time.Millisecond, MaxBackoff: 4 * time.Second, MaxRetryAfter: time.Minute,
				Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
			sess, err := c.OpenSession(context.Background(), "key-0123456789abcdef")
			if got := int(f.calls.Load()); got != tt.calls {
				t.Errorf("%d requests, want %d", got, tt.calls)
			}
			for _, k := range f.keys {
				if k != "key-0123456789abcdef" {
					t.Errorf("a retry sent Idempotency-Key %q", k)
				}
			}
			for i, least := range tt.waits {
				if i >= len(waits) || waits[i] < least || waits[i] > least+time.Second+least {
					t.Errorf("waits %v, want about %v", waits, tt.waits)
					break
				}
			}
			if tt.err == "" {
				if err != nil || sess.Token != "evs_t" || !sess.Replay || sess.ExpiresAt.Sub(sess.IssuedAt) != time.Hour {
					t.Fatalf("OpenSession: %+v, %v", sess, err)
				}
				return
			}
			var apiErr *Error
			if !errors.As(err, &apiErr) || apiErr.Code != tt.code || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("error %v, want a *Error %s containing %q", err, tt.code, tt.err)
			}
		})
	}
}

func TestErrorEnvelope(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer evs_token" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("headers %v", r.Header)
		}
		w.Header().Set("X-Request-Id", "abc")
		w.WriteHeader(422)
		w.Write([]byte(`{"error":{"code":"invalid_field","message":"latency_ms must be a number from 0 to 86400000","field":"cases[3].latency_ms"}}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "evk_test")
	_, err := c.PostMetrics(context.Background(), "evs_token", "key-0123456789abcdef", []byte(`{}`))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%T %v", err, err)
	}
	want := Error{StatusCode: 422, Code: "invalid_field", Field: "cases[3].latency_ms", Message: "latency_ms must be a number from 0 to 86400000", RequestID: "abc"}
	if *e != want {
		t.Errorf("error %+v, want %+v", *e, want)
	}
	if got := e.Error(); got != "422 invalid_field (cases[3].latency_ms): latency_ms must be a number from 0 to 86400000 [request abc]" {
		t.Errorf("Error() = %q", got)
	}
}

func TestContextEndsRetries(t *testing.T) {
	srv := httptest.NewServer(&flaky{responses: []func(http.ResponseWriter){unavailable("1"), unavailable("1"), unavailable("1")}})
	defer srv.Close()
	c, _ := New(srv.URL, "evk_test")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Usage(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("Usage after the context ended: %v after %v", err, time.Since(start))
	}
}
