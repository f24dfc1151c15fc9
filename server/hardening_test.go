package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/internal/polltest"
	"github.com/evalmeter/evalmeter/server"
)

// tokenOf builds a session token of the right shape for session id with
// the given MAC: "evs_" + base64url(id bytes ‖ mac).
func tokenOf(t *testing.T, sessionID string, mac []byte) string {
	t.Helper()
	id, err := hex.DecodeString(strings.TrimPrefix(sessionID, "sess_"))
	if err != nil || len(id) != 12 || len(mac) != 32 {
		t.Fatalf("tokenOf(%q, %d bytes of MAC)", sessionID, len(mac))
	}
	return "evs_" + base64.RawURLEncoding.EncodeToString(append(id, mac...))
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// TestForgedCredentialsCostNoQuery: a flood of well-formed tokens with a
// wrong HMAC, for sessions that exist and sessions that do not, and of
// malformed API keys, is refused with 401 without a single query: the
// token's HMAC is checked before the session is looked up.
func TestForgedCredentialsCostNoQuery(t *testing.T) {
	e := newEnv(t)
	queries := &queryTracer{}
	a := e.apiWith(ledger.Options{Timeout: 5 * time.Second, Tracer: queries})
	key := e.grant("acme", 5, nil)
	s := a.mustOpenSession(key, idem("real"))
	unknownID, _ := credential.NewSessionID(rand.Reader)
	stranger := mustSigner(t, 'x') // a key the API does not hold
	strangerToken := func(id string) string {
		token, err := stranger.Token(id, stranger.CurrentKeyID())
		if err != nil {
			t.Fatal(err)
		}
		return token
	}

	const metrics, usage = "/api/svc/v1/metrics", "/api/svc/v1/usage"
	forged := []struct {
		name string
		req  func() request
	}{
		{"random MAC, existing session", func() request {
			return request{method: "POST", path: metrics, bearer: tokenOf(t, s.Session.ID, randomBytes(32)), idemKey: idem("f1"), body: exampleBody}
		}},
		{"random MAC, unknown session", func() request {
			id, _ := credential.NewSessionID(rand.Reader)
			return request{method: "POST", path: metrics, bearer: tokenOf(t, id, randomBytes(32)), idemKey: idem("f2"), body: exampleBody}
		}},
		{"another key's MAC, existing session", func() request {
			return request{method: "POST", path: metrics, bearer: strangerToken(s.Session.ID), idemKey: idem("f3"), body: exampleBody}
		}},
		{"another key's MAC, unknown session", func() request {
			return request{method: "POST", path: metrics, bearer: strangerToken(unknownID), idemKey: idem("f4"), body: exampleBody}
		}},
		{"token one character short", func() request {
			return request{method: "POST", path: metrics, bearer: s.Session.Token[:len(s.Session.Token)-1], idemKey: idem("f5"), body: exampleBody}
		}},
		{"API key one character short", func() request {
			return request{method: "GET", path: usage, bearer: key[:len(key)-1]}
		}},
		{"API key with a character outside base64url", func() request {
			return request{method: "GET", path: "/api/svc/v1/schema", bearer: key[:len(key)-1] + "*"}
		}},
		{"API key one character long", func() request {
			return request{method: "POST", path: "/api/svc/v1/sessions", bearer: key + "A", idemKey: idem("f6")}
		}},
		{"session token as API key", func() request {
			return request{method: "GET", path: usage, bearer: s.Session.Token}
		}},
	}

	queries.started.Store(0)
	const rounds = 20
	var wg sync.WaitGroup
	for i := range rounds * len(forged) {
		wg.Go(func() {
			f := forged[i%len(forged)]
			if r := a.do(f.req()); r.status != http.StatusUnauthorized {
				t.Errorf("%s: %d %s, want 401", f.name, r.status, r.body)
			}
		})
	}
	wg.Wait()
	if n := queries.started.Load(); n != 0 {
		t.Errorf("%d forged or malformed credentials made %d queries, want 0", rounds*len(forged), n)
	}
	// The tracer does see the queries of a genuine request.
	if r := a.postMetrics(s.Session.Token, idem("genuine"), exampleBody); r.status != http.StatusOK {
		t.Fatalf("genuine request: %d %s", r.status, r.body)
	}
	if queries.started.Load() == 0 {
		t.Error("the tracer counted no query of a genuine request: it does not count")
	}
}

// TestTokenKeyMustBeTheSessions: during a rotation both secrets verify
// tokens, but a token counts only when signed by the key its session was
// opened with: a retired secret that leaked cannot forge the tokens of
// sessions signed after it.
func TestTokenKeyMustBeTheSessions(t *testing.T) {
	e := newEnv(t)
	key := e.grant("acme", 5, nil)
	previousSecret, currentSecret := bytes.Repeat([]byte("p"), 32), bytes.Repeat([]byte("c"), 32)
	previous, _ := credential.NewTokenSigner(previousSecret)
	var err error
	if e.tokens, err = credential.NewTokenSigner(previousSecret); err != nil {
		t.Fatal(err)
	}
	before := e.api().mustOpenSession(key, idem("before")).Session // signed by the previous secret
	if e.tokens, err = credential.NewTokenSigner(currentSecret, previousSecret); err != nil {
		t.Fatal(err)
	}
	a := e.api()
	after := a.mustOpenSession(key, idem("after")).Session // signed by the current one
	forged, err := previous.Token(after.ID, previous.CurrentKeyID())
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		token  string
		status int
	}{
		{"current key, session signed by it", after.Token, http.StatusOK},
		{"previous key, session signed by it", before.Token, http.StatusOK},
		{"previous key, session signed by the current", forged, http.StatusUnauthorized},
	}
	for i, tt := range tests {
		if r := a.postMetrics(tt.token, idem(fmt.Sprintf("k%d", i)), exampleBody); r.status != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.name, r.status, r.body, tt.status)
		}
	}
}

// TestFailureClasses: a bug is a 500 whose message and log line carry the
// request id, never a 503; a client that goes away while its request waits
// on PostgreSQL is logged as such, at info, not as a failure.
func TestFailureClasses(t *testing.T) {
	t.Run("bug", func(t *testing.T) {
		e := newEnv(t)
		key := e.grant("acme", 5, nil)
		s := e.api().mustOpenSession(key, idem("s"))
		// A schema the code does not expect: scanning expires_at fails in
		// pgx, an error that is neither PostgreSQL's nor the network's.
		if _, err := pgtest.Exec(t, e.url, `ALTER TABLE sessions ALTER COLUMN expires_at TYPE text`); err != nil {
			t.Fatal(err)
		}
		a := e.api() // a fresh pool: no statement prepared for the old schema
		// Not a.do: the document declares no 500, which only a bug answers.
		req, _ := http.NewRequest("POST", a.url+"/api/svc/v1/metrics", bytes.NewReader(exampleBody))
		req.Header = http.Header{"Authorization": {"Bearer " + s.Session.Token}, "Idempotency-Key": {idem("m")},
			"Content-Type": {"application/json"}, "X-Request-Id": {"bug-report-4711"}}
		resp, err := a.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r := response{status: resp.StatusCode, header: resp.Header, body: body}
		if r.status != http.StatusInternalServerError || r.errorCode(t) != "internal_error" {
			t.Fatalf("a bug: %d %s, want 500 internal_error", r.status, r.body)
		}
		if !strings.Contains(string(r.body), "bug-report-4711") {
			t.Errorf("the 500's message lacks the request id: %s", r.body)
		}
		if line := logLine(e.logs.String(), `"msg":"request failed"`); !strings.Contains(line, `"level":"ERROR"`) || !strings.Contains(line, "bug-report-4711") {
			t.Errorf("log line of the bug: %q, want an error with the request id", line)
		}
	})

	t.Run("client went away", func(t *testing.T) {
		e := newEnv(t)
		key := e.grant("acme", 5, nil)
		a := e.apiWithTimeout(30 * time.Second)
		// Hold the client's row: opening a session waits for it.
		ctx := context.Background()
		defer e.lockClient("acme")()
		reqCtx, cancel := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(reqCtx, "POST", a.url+"/api/svc/v1/sessions", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Idempotency-Key", idem("gone"))
		req.Header.Set("X-Request-Id", "gone-client-1")
		done := make(chan error, 1)
		go func() {
			resp, err := a.client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		// Give up once the server is waiting on the row, as a client's own timeout would.
		polltest.Until(t, 20*time.Second, "the request to wait on the row lock", func() error {
			if n := lockWaiters(t, e.url); n == 0 {
				return errors.New("no backend waits for a lock")
			}
			return nil
		})
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("the abandoned request: %v", err)
		}
		polltest.Until(t, 20*time.Second, "the request's log line", func() error {
			if logLine(e.logs.String(), `"msg":"request"`) == "" {
				return errors.New("not logged yet")
			}
			return nil
		})
		logs := e.logs.String()
		if line := logLine(logs, `"msg":"client went away"`); !strings.Contains(line, `"level":"INFO"`) || !strings.Contains(line, "gone-client-1") {
			t.Errorf("log line of the client going away: %q, want one at info with the request id", line)
		}
		if line := logLine(logs, `"msg":"request"`); !strings.Contains(line, `"level":"INFO"`) || !strings.Contains(line, `"status":499`) {
			t.Errorf("request log line: %q, want info with status 499", line)
		}
		if strings.Contains(logs, `"level":"ERROR"`) {
			t.Errorf("a client going away was logged as an error:\n%s", logs)
		}
	})
}

// TestResponseHeaders: every API response, success or error, carries
// X-Content-Type-Options: nosniff besides its JSON type and no-store.
func TestResponseHeaders(t *testing.T) {
	e := newEnv(t)
	a := e.api()
	key := e.grant("acme", 5, nil)
	s := a.mustOpenSession(key, idem("s"))
	tests := []struct {
		name   string
		req    request
		status int
	}{
		{"schema", request{method: "GET", path: "/api/svc/v1/schema", bearer: key}, 200},
		{"session", request{method: "POST", path: "/api/svc/v1/sessions", bearer: key, idemKey: idem("s2")}, 201},
		{"metrics", request{method: "POST", path: "/api/svc/v1/metrics", bearer: s.Session.Token, idemKey: idem("m"), body: exampleBody}, 200},
		{"usage", request{method: "GET", path: "/api/svc/v1/usage", bearer: key}, 200},
		{"401", request{method: "GET", path: "/api/svc/v1/usage"}, 401},
		{"400", request{method: "GET", path: "/api/svc/v1/usage?x", bearer: key}, 400},
		{"415", request{method: "POST", path: "/api/svc/v1/metrics", bearer: s.Session.Token, idemKey: idem("m2"), header: http.Header{"Content-Type": {"text/html"}}, body: exampleBody}, 415},
		{"404", request{method: "GET", path: "/", bearer: key}, 404},
		{"405", request{method: "PUT", path: "/api/svc/v1/usage", bearer: key}, 405},
	}
	for _, tt := range tests {
		r := a.do(tt.req)
		if r.status != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.name, r.status, r.body, tt.status)
		}
		for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Content-Type": "application/json", "Cache-Control": "no-store"} {
			if got := r.header.Get(k); got != want {
				t.Errorf("%s: %s %q, want %q", tt.name, k, got, want)
			}
		}
	}
}

// TestBodyReadErrorMessage: a body that fails to arrive is a 400 whose
// message says what to do, and never repeats the read error, which names
// the addresses of both ends.
func TestBodyReadErrorMessage(t *testing.T) {
	addrErr := &net.OpError{Op: "read", Net: "tcp",
		Source: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080},
		Addr:   &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 51234},
		Err:    errors.New("connection reset by peer")}
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"reset", addrErr},
		{"timeout", &net.OpError{Op: "read", Net: "tcp", Source: addrErr.Source, Addr: addrErr.Addr, Err: errors.New("i/o timeout")}},
		{"short body", io.ErrUnexpectedEOF},
	} {
		r := httptest.NewRequest("POST", "/api/svc/v1/metrics", io.MultiReader(strings.NewReader(`{"run_id":`), errReader{tt.err}))
		status, code, message := server.ReadBodyError(r)
		if status != http.StatusBadRequest || code != "malformed_json" {
			t.Errorf("%s: %d %s, want 400 malformed_json", tt.name, status, code)
		}
		for _, leak := range []string{"10.1.2.3", "192.0.2.7", "8080", "51234", tt.err.Error()} {
			if strings.Contains(message, leak) {
				t.Errorf("%s: the message %q repeats %q", tt.name, message, leak)
			}
		}
		if !strings.Contains(message, "send the whole body again") {
			t.Errorf("%s: the message %q does not say what to do", tt.name, message)
		}
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// logLine is the first line of logs that contains substr, or "".
func logLine(logs, substr string) string {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, substr) {
			return line
		}
	}
	return ""
}

// lockWaiters counts the backends of url's database waiting for a lock.
func lockWaiters(t *testing.T, url string) int {
	t.Helper()
	var n int
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	err = conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
