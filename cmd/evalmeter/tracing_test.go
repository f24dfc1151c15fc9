//go:build !customer

package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/evalmeter/evalmeter/internal/logtest"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/internal/polltest"
	"github.com/evalmeter/evalmeter/internal/proctest"
)

// TestAPITracingFromEnvironment runs evalmeter api under OTEL_* variables as
// an operator sets them. With an OTLP endpoint, a request's spans reach the
// collector (a loopback OTLP/HTTP receiver) by the time the API has stopped,
// and its log line names the trace. The caller's traceparent is only linked
// to, unless trusted (--trust-trace-context). Without OTEL_*, with the SDK
// disabled or the exporter none, nothing is set up: no span leaves, even to
// an endpoint that is set, and the log has neither "tracing on" nor trace
// ids.
func TestAPITracingFromEnvironment(t *testing.T) {
	receiver := newOTLPReceiver(t)
	t.Setenv("DATABASE_URL", pgtest.NewDatabase(t))
	key := grantForTest(t)

	// The caller's span context, which every request sends.
	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	otlp := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
	tests := []struct {
		name  string
		env   map[string]string
		trust bool // --trust-trace-context
		want  bool // tracing on
	}{
		{name: "OTLP over HTTP", env: otlp, want: true},
		{name: "OTLP over HTTP, caller's trace context trusted", env: otlp, trust: true, want: true},
		{name: "no OTEL variables", env: nil},
		{name: "SDK disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SDK_DISABLED": "true"}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_TRACES_EXPORTER": "none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.env, "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
				"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES")
			receiver.reset()
			logs := &logtest.Buffer{}
			runAPIOnce(t, slog.New(slog.NewJSONHandler(logs, nil)), tt.trust, func(addr string) {
				req, _ := http.NewRequest("GET", "http://"+addr+"/api/svc/v1/usage", nil)
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("X-Request-Id", "otel-usage")
				req.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("usage: %d", resp.StatusCode)
				}
			})

			// runAPI has returned: whatever was to be flushed was.
			spans, resources := receiver.received()
			lines := logLines(t, logs.String())
			var on, request map[string]any
			for _, l := range lines {
				switch {
				case l["msg"] == "tracing on":
					on = l
				case l["msg"] == "request" && l["request_id"] == "otel-usage":
					request = l
				}
			}
			if request == nil {
				t.Fatalf("no request log line in:\n%s", logs)
			}
			if !tt.want {
				if len(spans) != 0 || on != nil || request["trace_id"] != nil {
					t.Errorf("tracing is off, yet %d spans were exported, the log says %v, the request line %v", len(spans), on, request)
				}
				return
			}

			if on == nil || on["exporter"] != "otlp" || on["protocol"] != "http/protobuf" || on["endpoint"] != receiver.url {
				t.Errorf("tracing on log line %v, want exporter otlp, protocol http/protobuf, endpoint %s", on, receiver.url)
			}
			var server *tracepb.Span
			for _, s := range spans {
				if s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Name == "GET /api/svc/v1/usage" {
					server = s
				}
			}
			if server == nil {
				t.Fatalf("no server span GET /api/svc/v1/usage among %d spans exported: %v", len(spans), spanNames(spans))
			}
			if got := hex.EncodeToString(server.TraceId); request["trace_id"] != got || request["span_id"] != hex.EncodeToString(server.SpanId) {
				t.Errorf("request log line trace_id %v span_id %v, exported span %s %x", request["trace_id"], request["span_id"], got, server.SpanId)
			}
			trace, parent := hex.EncodeToString(server.TraceId), hex.EncodeToString(server.ParentSpanId)
			var links []string
			for _, l := range server.Links {
				links = append(links, hex.EncodeToString(l.TraceId)+"-"+hex.EncodeToString(l.SpanId))
			}
			if tt.trust {
				if trace != callerTrace || parent != callerSpan || len(links) != 0 {
					t.Errorf("trusted: span in trace %s, parent %q, links %v; want the caller's child", trace, parent, links)
				}
			} else if trace == callerTrace || parent != "" || !slices.Equal(links, []string{callerTrace + "-" + callerSpan}) {
				t.Errorf("span in trace %s, parent %q, links %v; want a new trace linked to the caller's span", trace, parent, links)
			}
			queries := 0
			for _, s := range spans {
				if bytes.Equal(s.ParentSpanId, server.SpanId) && bytes.Equal(s.TraceId, server.TraceId) && strings.HasPrefix(s.Name, "query ") {
					queries++
				}
			}
			if queries == 0 {
				t.Errorf("no query span under the request's: %v", spanNames(spans))
			}
			for _, res := range resources {
				for _, kv := range res.GetAttributes() {
					if kv.Key == "service.name" && kv.Value.GetStringValue() != "evalmeter-api" {
						t.Errorf("service.name %q, want evalmeter-api", kv.Value.GetStringValue())
					}
				}
			}
		})
	}
}

// runAPIOnce runs evalmeter api with log (and trustTraceContext) until use,
// given its address, is done, then stops it as SIGTERM would and waits for
// it to return.
func runAPIOnce(t *testing.T, log *slog.Logger, trustTraceContext bool, use func(addr string)) {
	t.Helper()
	addr, opsAddr := proctest.FreeAddr(t), proctest.FreeAddr(t)
	cfg := &apiConfig{
		addr: addr, opsAddr: opsAddr, databaseURL: os.Getenv("DATABASE_URL"),
		tokenSecrets: [][]byte{[]byte(strings.Repeat("s", 32))}, dbTimeout: 5 * time.Second, grace: 5 * time.Second,
		trustTraceContext: trustTraceContext,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runAPI(ctx, cfg, log) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("api: %v", err)
		}
	}()
	polltest.Until(t, 30*time.Second, "the API serving", func() error {
		resp, err := http.Get("http://" + opsAddr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	use(addr)
}

// grantForTest provisions a client with evalmeter migrate and clients grant,
// on DATABASE_URL, and returns its API key.
func grantForTest(t *testing.T) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if status := run([]string{"migrate"}, nil, &stdout, &stderr); status != 0 {
		t.Fatalf("migrate: %d %s", status, &stderr)
	}
	stdout.Reset()
	if status := run([]string{"clients", "grant", "--client-id", "acme", "--hours", "3"}, nil, &stdout, &stderr); status != 0 {
		t.Fatalf("clients grant: %d %s", status, &stderr)
	}
	return strings.TrimSpace(stdout.String())
}

// otlpReceiver is an OTLP/HTTP trace receiver on loopback, as an
// OpenTelemetry Collector's otlp receiver: protobuf, gzip or not.
type otlpReceiver struct {
	url string

	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []*resourcepb.Resource
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP trace export", http.StatusNotFound)
			return
		}
		body := io.Reader(req.Body)
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		b, err := io.ReadAll(body)
		var export coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &export)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&export)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *otlpReceiver) add(export *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range export.ResourceSpans {
		r.resources = append(r.resources, rs.Resource)
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
}

func (r *otlpReceiver) received() ([]*tracepb.Span, []*resourcepb.Resource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.spans, r.resources
}

func (r *otlpReceiver) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans, r.resources = nil, nil
}

func spanNames(spans []*tracepb.Span) []string {
	var names []string
	for _, s := range spans {
		names = append(names, fmt.Sprintf("%s (%s)", s.Name, s.Kind))
	}
	return names
}

// logLines parses JSON log output.
func logLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		lines = append(lines, line)
	}
	return lines
}
