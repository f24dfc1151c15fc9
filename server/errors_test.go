package server_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRefusals covers every refusal of docs/design.md#6-error-codes-and-statuses
// and the order of checks of docs/design.md#52-the-order-of-checks, with the error envelope and the headers each status needs.
func TestRefusals(t *testing.T) {
	e := newEnv(t)
	a := e.api()
	key := e.grant("acme", 100, nil)
	revoked := e.grant("gone", 1, nil)
	e.grant("gone", 1, nil) // rotates: the first key is revoked
	s := a.mustOpenSession(key, idem("setup"))
	token := s.Session.Token
	garbageToken := "evs_" + strings.Repeat("A", 59)
	big := bytes.Repeat([]byte(" "), 262144-len(exampleBody)+1)
	atLimit := append(bytes.Repeat([]byte(" "), 262144-len(exampleBody)), exampleBody...)

	const (
		schema   = "/api/svc/v1/schema"
		sessions = "/api/svc/v1/sessions"
		metrics  = "/api/svc/v1/metrics"
		usage    = "/api/svc/v1/usage"
	)
	tests := []struct {
		name   string
		req    request
		status int
		code   string
		header string // a header the response must carry
	}{
		// 401, with the RFC 6750 challenge.
		{"no credential", request{method: "GET", path: usage}, 401, "unauthorized", `Bearer realm="evalmeter"`},
		{"basic auth", request{method: "GET", path: usage, header: http.Header{"Authorization": {"Basic YTpi"}}}, 401, "unauthorized", `error="invalid_token"`},
		{"garbage bearer", request{method: "GET", path: usage, bearer: "letmein"}, 401, "unauthorized", `error="invalid_token"`},
		{"two credentials", request{method: "GET", path: usage, header: http.Header{"Authorization": {"Bearer " + key, "Bearer " + key}}}, 401, "unauthorized", ""},
		{"huge bearer", request{method: "GET", path: usage, bearer: "evk_" + strings.Repeat("A", 5000)}, 401, "unauthorized", ""},
		{"revoked key", request{method: "GET", path: usage, bearer: revoked}, 401, "unauthorized", `error="invalid_token"`},
		{"unknown key", request{method: "GET", path: schema, bearer: "evk_" + strings.Repeat("B", 43)}, 401, "unauthorized", ""},
		{"session token on usage", request{method: "GET", path: usage, bearer: token}, 401, "unauthorized", ""},
		{"api key on metrics", request{method: "POST", path: metrics, bearer: key, idemKey: idem("m"), body: exampleBody}, 401, "unauthorized", ""},
		{"garbage token on metrics", request{method: "POST", path: metrics, bearer: garbageToken, idemKey: idem("m"), body: exampleBody}, 401, "unauthorized", ""},
		{"forged token on metrics", request{method: "POST", path: metrics, bearer: token[:len(token)-3] + "AAA", idemKey: idem("m"), body: exampleBody}, 401, "unauthorized", ""},
		{"401 before 400", request{method: "POST", path: sessions + "?x"}, 401, "unauthorized", ""},

		// 400: query, Idempotency-Key, unexpected body, JSON.
		{"query on schema", request{method: "GET", path: schema + "?v=2", bearer: key}, 400, "unexpected_query", ""},
		{"empty query on usage", request{method: "GET", path: usage + "?", bearer: key}, 400, "unexpected_query", ""},
		{"query on metrics", request{method: "POST", path: metrics + "?debug=1", bearer: token, idemKey: idem("m"), body: exampleBody}, 400, "unexpected_query", ""},
		{"body on usage", request{method: "GET", path: usage, bearer: key, body: []byte("{}")}, 400, "unexpected_body", ""},
		{"body on sessions", request{method: "POST", path: sessions, bearer: key, idemKey: idem("b"), body: []byte("{}")}, 400, "unexpected_body", ""},
		{"no key on sessions", request{method: "POST", path: sessions, bearer: key}, 400, "missing_idempotency_key", ""},
		{"no key on metrics", request{method: "POST", path: metrics, bearer: token, body: exampleBody}, 400, "missing_idempotency_key", ""},
		{"short key", request{method: "POST", path: sessions, bearer: key, idemKey: "too-short"}, 400, "invalid_idempotency_key", ""},
		{"129-char key", request{method: "POST", path: sessions, bearer: key, idemKey: strings.Repeat("k", 129)}, 400, "invalid_idempotency_key", ""},
		{"key with a space", request{method: "POST", path: sessions, bearer: key, idemKey: "has a space in it!!"}, 400, "invalid_idempotency_key", ""},
		{"two keys", request{method: "POST", path: sessions, bearer: key, header: http.Header{"Idempotency-Key": {idem("a"), idem("b")}}}, 400, "invalid_idempotency_key", ""},
		{"key 400 before 415", request{method: "POST", path: metrics, bearer: token, header: http.Header{"Content-Type": {"text/plain"}}, body: exampleBody}, 400, "missing_idempotency_key", ""},
		{"malformed JSON", request{method: "POST", path: metrics, bearer: token, idemKey: idem("m-bad"), body: []byte(`{"run_id":`)}, 400, "malformed_json", ""},
		{"empty body", request{method: "POST", path: metrics, bearer: token, idemKey: idem("m-empty"), body: []byte{}}, 400, "malformed_json", ""},
		{"duplicate key", request{method: "POST", path: metrics, bearer: token, idemKey: idem("m-dup"), body: []byte(`{"run_id":"a","run_id":"b","cases":[]}`)}, 400, "malformed_json", ""},

		// 415, 413, 422.
		{"text/plain", request{method: "POST", path: metrics, bearer: token, idemKey: idem("m"), header: http.Header{"Content-Type": {"text/plain"}}, body: exampleBody}, 415, "unsupported_media_type", ""},
		{"no content type", request{method: "POST", path: metrics, bearer: token, idemKey: idem("m"), header: http.Header{"Content-Type": {""}}, body: exampleBody}, 415, "unsupported_media_type", ""},
		{"latin-1", request{method: "POST", path: metrics, bearer: token, idemKey: idem("m"), header: http.Header{"Content-Type": {"application/json; charset=iso-8859-1"}}, body: exampleBody}, 415, "unsupported_media_type", ""},
		{"415 before 413", request{method: "POST", path: metrics, bearer: token, idemKey: idem("m"), header: http.Header{"Content-Type": {"text/plain"}}, body: append(big, exampleBody...)}, 415, "unsupported_media_type", ""},
		{"one byte too large", request{method: "POST", path: metrics, bearer: token, idemKey: idem("m-big"), body: append(big, exampleBody...)}, 413, "payload_too_large", ""},
		{"unknown field", request{method: "POST", path: metrics, bearer: token, idemKey: idem("m-422"), body: []byte(`{"run_id":"r","cases":[{"case_id":"a","status":"pass","latency_ms":1,"prompt":"hi"}]}`)}, 422, "unknown_field", ""},
		{"501 cases", request{method: "POST", path: metrics, bearer: token, idemKey: idem("m-501"), body: cases(501)}, 422, "invalid_field", ""},

		// 404, 405.
		{"unknown path", request{method: "GET", path: "/api/svc/v1/reports", bearer: key}, 404, "not_found", ""},
		{"unclean path", request{method: "GET", path: "/api/svc/v1//usage", bearer: key}, 404, "not_found", ""},
		{"v2", request{method: "GET", path: "/api/svc/v2/usage", bearer: key}, 404, "not_found", ""},
		{"DELETE usage", request{method: "DELETE", path: usage, bearer: key}, 405, "method_not_allowed", "GET"},
		{"GET metrics", request{method: "GET", path: metrics, bearer: token}, 405, "method_not_allowed", "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := a.do(tt.req)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if code := r.errorCode(t); code != tt.code {
				t.Errorf("error.code %q, want %q", code, tt.code)
			}
			switch {
			case tt.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), `Bearer realm="evalmeter"`):
				t.Errorf("401 without the challenge: %v", r.header)
			case tt.header != "" && tt.status == 401 && !strings.Contains(r.header.Get("WWW-Authenticate"), tt.header):
				t.Errorf("WWW-Authenticate %q, want %q in it", r.header.Get("WWW-Authenticate"), tt.header)
			case tt.status == 405 && r.header.Get("Allow") != tt.header:
				t.Errorf("Allow %q, want %q", r.header.Get("Allow"), tt.header)
			}
		})
	}

	// Accepted variants.
	if r := a.do(request{method: "POST", path: metrics, bearer: token, idemKey: idem("m-limit"), body: atLimit}); r.status != 200 {
		t.Errorf("a body of exactly 262144 bytes: %d %s", r.status, r.body)
	}
	if r := a.do(request{method: "POST", path: metrics, bearer: token, idemKey: idem("m-charset"), header: http.Header{"Content-Type": {"application/json; charset=UTF-8"}}, body: exampleBody}); r.status != 200 {
		t.Errorf("charset=UTF-8: %d %s", r.status, r.body)
	}
	if r, _ := a.openSession(key, `"`+idem("quoted")+`"`); r.status != 201 {
		t.Errorf("RFC 8941 quoted key: %d %s", r.status, r.body)
	}
	if r, _ := a.openSession(key, idem("quoted")); r.status != 201 || !strings.Contains(string(r.body), `"idempotent_replay":true`) {
		t.Errorf("the quoted and bare forms are one key: %d %s", r.status, r.body)
	}
	if r := a.do(request{method: "GET", path: usage, header: http.Header{"Authorization": {"bearer " + key}}}); r.status != 200 {
		t.Errorf("lower-case scheme: %d", r.status)
	}
	// None of the refusals consumed a credit: the setup session and the quoted one.
	if u := e.usage("acme"); u.ConsumedHours != 2 {
		t.Errorf("consumed %d, want 2", u.ConsumedHours)
	}
}

// TestOversizedBodyIsNotRead: a 413 does not read the body past the limit,
// with or without a Content-Length.
func TestOversizedBodyIsNotRead(t *testing.T) {
	e := newEnv(t)
	a := e.api()
	key := e.grant("acme", 1, nil)
	s := a.mustOpenSession(key, idem("s"))
	addr := strings.TrimPrefix(a.url, "http://")

	for _, chunked := range []bool{false, true} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		head := "POST /api/svc/v1/metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + s.Session.Token +
			"\r\nIdempotency-Key: " + idem("huge") + "\r\nContent-Type: application/json\r\n"
		if chunked {
			head += "Transfer-Encoding: chunked\r\n\r\n"
		} else {
			head += "Content-Length: 104857600\r\n\r\n" // 100 MiB announced
		}
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		// Send just over the limit; the server must answer without the rest.
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for sent := 0; sent <= 262144; sent += len(chunk) {
			if chunked {
				io.WriteString(conn, strconv.FormatInt(int64(len(chunk)), 16)+"\r\n")
			}
			if _, err := conn.Write(chunk); err != nil {
				break // the server may close early: fine
			}
			if chunked {
				io.WriteString(conn, "\r\n")
			}
		}
		status, err := io.ReadAll(io.LimitReader(conn, 12))
		conn.Close()
		if err != nil || string(status) != "HTTP/1.1 413" {
			t.Errorf("chunked=%v: read %q, %v; want a 413 status line", chunked, status, err)
		}
	}
}

func cases(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"run_id":"r","cases":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"case_id":"c` + strconv.Itoa(i) + `","status":"pass","latency_ms":1}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}
