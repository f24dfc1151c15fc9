package server_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	evalapi "github.com/evalmeter/evalmeter/api"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/tracing/tracingtest"
	"github.com/evalmeter/evalmeter/server"
)

// TestTracing: with a TracerProvider, each request over real HTTP gets one
// server span named by its route template, with the ledger's queries as
// child spans in its trace, and its log line names that span. A caller's
// traceparent starts no child in its trace: a new trace, linked to it. No
// span holds the API key (not even pasted into a path), the session token,
// their hashes or the request body.
func TestTracing(t *testing.T) {
	e := newEnv(t)
	key := e.grant("acme", 3, nil)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	counter := &queryTracer{} // Options.Tracer still sees every query
	store, err := ledger.Open(context.Background(), e.url, ledger.Options{Timeout: 5 * time.Second, TracerProvider: tp, Tracer: counter})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	srv, err := server.New(server.Config{
		Ledger: store, Tokens: e.tokens, Now: e.clock.Now, Random: rand.Reader,
		Logger: slog.New(slog.NewJSONHandler(e.logs, nil)), TracerProvider: tp,
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	a := &api{t: t, url: ts.URL, client: ts.Client()}

	marker := make([]byte, 8)
	rand.Read(marker)
	runID, caseID := "trace-run-"+hex.EncodeToString(marker), "trace-case-"+hex.EncodeToString(marker)
	body := []byte(`{"run_id":"` + runID + `","cases":[{"case_id":"` + caseID + `","status":"pass","latency_ms":12}]}`)

	// A caller's trace context, which is only linked to.
	callerTrace, callerSpan := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	withID := func(id string, extra ...string) http.Header {
		h := http.Header{"X-Request-Id": {id}}
		for i := 0; i+1 < len(extra); i += 2 {
			h.Set(extra[i], extra[i+1])
		}
		return h
	}
	resp := a.do(request{method: "GET", path: "/api/svc/v1/schema", bearer: key, header: withID("trace-schema")})
	if resp.status != http.StatusOK {
		t.Fatalf("schema: %d %s", resp.status, resp.body)
	}
	resp = a.do(request{method: "POST", path: "/api/svc/v1/sessions", bearer: key, idemKey: idem("trace-session"), header: withID("trace-sessions")})
	var sess evalapi.SessionEnvelope
	if resp.status != http.StatusCreated {
		t.Fatalf("session: %d %s", resp.status, resp.body)
	}
	resp.decode(t, &sess)
	token := sess.Session.Token
	resp = a.do(request{method: "POST", path: "/api/svc/v1/metrics", bearer: token, idemKey: idem("trace-metrics"), body: body, header: withID("trace-metrics")})
	if resp.status != http.StatusOK {
		t.Fatalf("metrics: %d %s", resp.status, resp.body)
	}
	resp = a.do(request{method: "GET", path: "/api/svc/v1/usage", bearer: key,
		header: withID("trace-usage", "Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")})
	if resp.status != http.StatusOK {
		t.Fatalf("usage: %d %s", resp.status, resp.body)
	}
	// A path with a session id in it is no route: it must not name a span.
	resp = a.do(request{method: "GET", path: "/api/svc/v1/sessions/" + sess.Session.ID, bearer: token, header: withID("trace-unmatched")})
	if resp.status != http.StatusNotFound {
		t.Fatalf("unmatched: %d %s", resp.status, resp.body)
	}
	// Nor a key pasted into a path: url.path must not keep it.
	resp = a.do(request{method: "GET", path: "/api/svc/v1/usage/" + key, header: withID("trace-key-in-path")})
	if resp.status != http.StatusNotFound {
		t.Fatalf("key in path: %d %s", resp.status, resp.body)
	}

	requests := []struct {
		id, wantName, wantRoute, wantPath string
		queries                           bool // the request reads the ledger
	}{
		{"trace-schema", "GET /api/svc/v1/schema", "/api/svc/v1/schema", "/api/svc/v1/schema", true},
		{"trace-sessions", "POST /api/svc/v1/sessions", "/api/svc/v1/sessions", "/api/svc/v1/sessions", true},
		{"trace-metrics", "POST /api/svc/v1/metrics", "/api/svc/v1/metrics", "/api/svc/v1/metrics", true},
		{"trace-usage", "GET /api/svc/v1/usage", "/api/svc/v1/usage", "/api/svc/v1/usage", true},
		{"trace-unmatched", "GET", "", "unmatched", false},
		{"trace-key-in-path", "GET", "", "unmatched", false},
	}
	// A server span ends after its response is written: wait for them all.
	var spans []sdktrace.ReadOnlySpan
	servers := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for deadline := time.Now().Add(10 * time.Second); len(servers) < len(requests) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		spans = rec.Ended()
		clear(servers)
		for _, s := range spans {
			if s.SpanKind() == trace.SpanKindServer {
				servers[s.SpanContext().SpanID()] = s
			}
		}
	}
	if len(servers) != len(requests) {
		t.Fatalf("%d server spans, want one per request (%d)", len(servers), len(requests))
	}
	// A statement the ledger runs for several requests has a span of its
	// own, under the first request's span: a query's request is the parent
	// of its batch span, if it has one.
	batches := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.InstrumentationScope().Name == "github.com/evalmeter/evalmeter/internal/ledger" {
			batches[s.SpanContext().SpanID()] = s
		}
	}
	requestOf := func(s sdktrace.ReadOnlySpan) trace.SpanID {
		if b, ok := batches[s.Parent().SpanID()]; ok {
			return b.Parent().SpanID()
		}
		return s.Parent().SpanID()
	}
	logs := requestLogLines(t, e.logs.String())

	for _, r := range requests {
		line, ok := logs[r.id]
		if !ok {
			t.Errorf("%s: no request log line", r.id)
			continue
		}
		spanID, _ := trace.SpanIDFromHex(line["span_id"])
		span, ok := servers[spanID]
		if !ok {
			t.Errorf("%s: the log line's span_id %q is no server span's", r.id, line["span_id"])
			continue
		}
		if got := span.SpanContext().TraceID().String(); line["trace_id"] != got {
			t.Errorf("%s: log line trace_id %q, span's %q", r.id, line["trace_id"], got)
		}
		if span.Name() != r.wantName {
			t.Errorf("%s: span name %q, want %q", r.id, span.Name(), r.wantName)
		}
		if got := attr(span.Attributes(), "http.route"); got != r.wantRoute {
			t.Errorf("%s: http.route %q, want %q", r.id, got, r.wantRoute)
		}
		if got := attr(span.Attributes(), "url.path"); got != r.wantPath {
			t.Errorf("%s: url.path %q, want %q", r.id, got, r.wantPath)
		}
		// Every request starts a trace; the caller's traceparent is a link.
		if span.Parent().IsValid() {
			t.Errorf("%s: parent %v, want none: a new trace", r.id, span.Parent())
		}
		var links []string
		for _, l := range span.Links() {
			links = append(links, l.SpanContext.TraceID().String()+"-"+l.SpanContext.SpanID().String())
		}
		wantLinks := []string(nil)
		if r.id == "trace-usage" {
			wantLinks = []string{callerTrace + "-" + callerSpan}
			if span.SpanContext().TraceID().String() == callerTrace {
				t.Errorf("%s: in the caller's trace %s, want a new one", r.id, callerTrace)
			}
		}
		if !slices.Equal(links, wantLinks) {
			t.Errorf("%s: links %v, want %v", r.id, links, wantLinks)
		}
		children := 0
		for _, s := range spans {
			if requestOf(s) == spanID && s.InstrumentationScope().Name == "github.com/exaring/otelpgx" {
				children++
				if s.SpanContext().TraceID() != span.SpanContext().TraceID() || s.SpanKind() != trace.SpanKindClient {
					t.Errorf("%s: query span %q in trace %v, kind %v", r.id, s.Name(), s.SpanContext().TraceID(), s.SpanKind())
				}
				if attr(s.Attributes(), "db.query.text") == "" {
					t.Errorf("%s: query span %q without db.query.text", r.id, s.Name())
				}
			}
		}
		if (children > 0) != r.queries {
			t.Errorf("%s: %d query spans under the server span, want some: %t", r.id, children, r.queries)
		}
	}
	for _, s := range spans {
		if s.SpanKind() != trace.SpanKindServer {
			if _, ok := servers[requestOf(s)]; !ok {
				t.Errorf("span %q has no request span as its parent (or its batch span's)", s.Name())
			}
		}
	}
	if counter.started.Load() == 0 {
		t.Error("Options.Tracer saw no query beside the TracerProvider")
	}

	// Nothing secret, in any spelling, anywhere in any span.
	keyHash, _ := credential.HashAPIKey(key)
	forbidden := map[string]string{"the API key": key, "the session token": token, "the request body": string(body), "the run_id": runID, "the case_id": caseID}
	for name, secret := range map[string]string{"API key": key, "session token": token} {
		sum := sha256.Sum256([]byte(secret))
		forbidden["the SHA-256 of the "+name] = hex.EncodeToString(sum[:])
		forbidden["the SHA-256 of the "+name+", upper case"] = strings.ToUpper(hex.EncodeToString(sum[:]))
		forbidden["the SHA-256 of the "+name+", base64"] = base64.StdEncoding.EncodeToString(sum[:])
		forbidden["the SHA-256 of the "+name+", raw"] = string(sum[:])
		forbidden["the SHA-256 of the "+name+", as Go prints it"] = fmt.Sprint(sum[:])
	}
	if fmt.Sprint(keyHash[:]) != forbidden["the SHA-256 of the API key, as Go prints it"] {
		t.Fatal("the ledger's key hash is not the SHA-256 of the key: the scan below misses it")
	}
	for _, s := range spans {
		for _, text := range tracingtest.SpanText(s) {
			for what, secret := range forbidden {
				if strings.Contains(text, secret) {
					t.Errorf("span %q records %s in %q", s.Name(), what, text)
				}
			}
		}
	}

	// Without a TracerProvider, the log line has no trace fields.
	plain := e.api()
	e.logs.Reset()
	plain.do(request{method: "GET", path: "/api/svc/v1/schema", bearer: key, header: withID("untraced")})
	if line := requestLogLines(t, e.logs.String())["untraced"]; line == nil || line["trace_id"] != "" || line["span_id"] != "" {
		t.Errorf("untraced request log line %v, want one without trace_id and span_id", line)
	}
}

// TestTracingCallerContext: anyone can send a traceparent, so by default it
// neither forces sampling under a parent-based sampler nor puts the span in
// the caller's trace: the span is a new trace's root, linked to the
// caller's. TrustTraceContext, for a proxy in front that sets it, makes it
// the parent.
func TestTracingCallerContext(t *testing.T) {
	e := newEnv(t)
	key := e.grant("acme", 3, nil)
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	never := sdktrace.ParentBased(sdktrace.NeverSample()) // samples only what a parent asks
	for _, c := range []struct {
		name    string
		trust   bool
		sampler sdktrace.Sampler
		// want: no span (""), a new trace linked to the caller's ("link"),
		// or a child of the caller's span ("child").
		want string
	}{
		{name: "sampled caller, parent-based sampler: not sampled", sampler: never, want: ""},
		{name: "a new trace, linked", sampler: sdktrace.AlwaysSample(), want: "link"},
		{name: "trusted: the caller's child, sampled", trust: true, sampler: never, want: "child"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(c.sampler))
			srv, err := server.New(server.Config{
				Ledger: e.store, Tokens: e.tokens, Now: e.clock.Now, Random: rand.Reader,
				Logger: slog.New(slog.NewJSONHandler(e.logs, nil)), TracerProvider: tp, TrustTraceContext: c.trust,
			})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			a := &api{t: t, url: ts.URL, client: ts.Client()}
			resp := a.do(request{method: "GET", path: "/api/svc/v1/schema", bearer: key,
				header: http.Header{"Traceparent": {"00-" + callerTrace + "-" + callerSpan + "-01"}}})
			if resp.status != http.StatusOK {
				t.Fatalf("schema: %d %s", resp.status, resp.body)
			}
			ts.Close() // the server span has ended
			var span sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.SpanKind() == trace.SpanKindServer {
					span = s
				}
			}
			got := ""
			if span != nil {
				parent, links := span.Parent(), span.Links()
				switch {
				case parent.TraceID().String() == callerTrace && parent.SpanID().String() == callerSpan && parent.IsRemote() && len(links) == 0:
					got = "child"
				case !parent.IsValid() && span.SpanContext().TraceID().String() != callerTrace && len(links) == 1 &&
					links[0].SpanContext.TraceID().String() == callerTrace && links[0].SpanContext.SpanID().String() == callerSpan:
					got = "link"
				default:
					got = fmt.Sprintf("parent %v, links %v", parent, links)
				}
			}
			if got != c.want {
				t.Errorf("server span: %q, want %q", got, c.want)
			}
		})
	}
}

// requestLogLines are the request log lines, by request_id.
func requestLogLines(t *testing.T, logs string) map[string]map[string]string {
	t.Helper()
	lines := map[string]map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if line["msg"] != "request" {
			continue
		}
		fields := map[string]string{}
		for k, v := range line {
			fields[k] = fmt.Sprint(v)
		}
		lines[fields["request_id"]] = fields
	}
	return lines
}

func attr(kvs []attribute.KeyValue, key string) string {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
