package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	evalapi "github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/metrics"
	"github.com/evalmeter/evalmeter/server"
)

// TestClientFlow walks a client through every endpoint: schema, a session
// and its replay, metrics and their replay and conflict, usage.
func TestClientFlow(t *testing.T) {
	e := newEnv(t)
	a := e.api()
	key := e.grant("acme", 3, nil)

	// Schema: 200, the published document, no credit.
	resp := a.do(request{method: "GET", path: "/api/svc/v1/schema", bearer: key})
	if resp.status != http.StatusOK {
		t.Fatalf("schema: %d %s", resp.status, resp.body)
	}
	var doc evalapi.SchemaDocument
	resp.decode(t, &doc)
	if doc.SchemaVersion != "1.0" || doc.Service != "evalmeter" || len(doc.ProhibitedContent) == 0 ||
		doc.Limits != (evalapi.Limits{BodyBytes: 262144, CasesPerRequest: 500, AccessWindowMinutes: 60}) ||
		doc.Operations.Schema != "GET /api/svc/v1/schema" || doc.Operations.Sessions != "POST /api/svc/v1/sessions" ||
		doc.Operations.Metrics != "POST /api/svc/v1/metrics" || doc.Operations.Usage != "GET /api/svc/v1/usage" ||
		doc.Output.ReportIncluded || !bytes.Contains(resp.body, []byte(`"report_included":false`)) {
		t.Errorf("schema document: %s", resp.body)
	}
	if !jsonEqual(t, doc.MetricsRequest, evalapi.MetricsRequestSchema) {
		t.Error("metrics_request is not the published JSON Schema")
	}

	// A session, and its replay: the same token, no second credit.
	resp, first := a.openSession(key, idem("session-1"))
	if resp.status != http.StatusCreated || first.IdempotentReplay {
		t.Fatalf("open session: %d %s", resp.status, resp.body)
	}
	s := first.Session
	if !strings.HasPrefix(s.ID, "sess_") || s.AccessWindowMinutes != 60 || s.HoursConsumed != 1 ||
		!s.IssuedAt.Equal(e.clock.Now()) || s.ExpiresAt.Sub(s.IssuedAt) != time.Hour {
		t.Errorf("session: %s", resp.body)
	}
	resp, again := a.openSession(key, idem("session-1"))
	if resp.status != http.StatusCreated || !again.IdempotentReplay || again.Session != first.Session {
		t.Errorf("replay: %d %s, want the first session again", resp.status, resp.body)
	}
	if u := e.usage("acme"); u.ConsumedHours != 1 || u.RemainingHours != 2 || u.ActiveSessions != 1 {
		t.Errorf("after a session and its replay: %+v", u)
	}

	// Metrics: computed, replayed byte for byte, conflict on another body.
	want, err := metrics.Compute(exampleBody)
	if err != nil {
		t.Fatal(err)
	}
	resp = a.postMetrics(s.Token, idem("metrics-1"), exampleBody)
	if resp.status != http.StatusOK {
		t.Fatalf("metrics: %d %s", resp.status, resp.body)
	}
	var got evalapi.MetricsEnvelope
	resp.decode(t, &got) // the shape, strictly
	var raw map[string]json.RawMessage
	resp.decode(t, &raw) // the figures as the service wrote them
	wantJSON, _ := json.Marshal(want)
	if got.IdempotentReplay || !jsonEqual(t, raw["metrics"], wantJSON) {
		t.Errorf("metrics: %s\nwant %s", resp.body, wantJSON)
	}
	replay := a.postMetrics(s.Token, idem("metrics-1"), exampleBody)
	if replay.status != http.StatusOK || !bytes.Equal(replay.body, bytes.Replace(resp.body, []byte(`"idempotent_replay":false}`), []byte(`"idempotent_replay":true}`), 1)) {
		t.Errorf("replay is not the first response byte for byte with idempotent_replay true:\n%s\n%s", resp.body, replay.body)
	}
	// The same request in another key order is the same canonical request.
	var reordered map[string]any
	json.Unmarshal(exampleBody, &reordered)
	spaced, _ := json.MarshalIndent(reordered, "", "    ")
	if r := a.postMetrics(s.Token, idem("metrics-1"), spaced); r.status != http.StatusOK || !bytes.Equal(r.body, replay.body) {
		t.Errorf("same canonical request, other bytes: %d %s", r.status, r.body)
	}
	other := []byte(`{"run_id":"other","cases":[{"case_id":"a","status":"pass","latency_ms":1}]}`)
	conflict := a.postMetrics(s.Token, idem("metrics-1"), other)
	if conflict.status != http.StatusConflict || conflict.errorCode(t) != "idempotency_key_reused" {
		t.Errorf("another request under a used key: %d %s", conflict.status, conflict.body)
	}

	// Usage: 200 with the figures.
	resp = a.do(request{method: "GET", path: "/api/svc/v1/usage", bearer: key})
	var usage evalapi.UsageEnvelope
	resp.decode(t, &usage)
	if u := usage.Usage; resp.status != http.StatusOK || u.ClientID != "acme" || u.AllocatedHours != 3 ||
		u.ConsumedHours != 1 || u.RemainingHours != 2 || u.ActiveSessions != 1 || !strings.Contains(u.Metering, "60-minute") {
		t.Errorf("usage: %d %s", resp.status, resp.body)
	}

	// Nothing secret reached the logs.
	logs := e.logs.String()
	if strings.Contains(logs, key) || strings.Contains(logs, s.Token) || strings.Contains(logs, "nightly-2026-11-21") {
		t.Error("a key, a token or a request body was logged")
	}
	if !strings.Contains(logs, `"client_id":"acme"`) || !strings.Contains(logs, `"route":"metrics"`) {
		t.Errorf("request log lines lack client or route:\n%s", logs)
	}
}

// TestSessionWindow: a token works for 60 minutes from creation, idle time
// included, then yields 401.
func TestSessionWindow(t *testing.T) {
	e := newEnv(t)
	a := e.api()
	key := e.grant("acme", 1, nil)
	s := a.mustOpenSession(key, idem("window"))

	e.clock.Advance(59*time.Minute + 59*time.Second)
	if r := a.postMetrics(s.Session.Token, idem("m-1"), exampleBody); r.status != http.StatusOK {
		t.Fatalf("at 59:59: %d %s", r.status, r.body)
	}
	if u := e.usage("acme"); u.ActiveSessions != 1 {
		t.Errorf("at 59:59 active sessions = %d, want 1", u.ActiveSessions)
	}
	e.clock.Advance(time.Second)
	r := a.postMetrics(s.Session.Token, idem("m-2"), exampleBody)
	if r.status != http.StatusUnauthorized || r.errorCode(t) != "unauthorized" ||
		!strings.Contains(r.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("at 60:00: %d %v %s", r.status, r.header, r.body)
	}
	if u := e.usage("acme"); u.ActiveSessions != 0 || u.ConsumedHours != 1 {
		t.Errorf("after the window: %+v", u)
	}
}

// TestCredits: 402 once the credits are used, and lowering an allocation
// never makes the remainder negative.
func TestCredits(t *testing.T) {
	e := newEnv(t)
	a := e.api()
	key := e.grant("acme", 1, nil)
	if r, _ := a.openSession(key, idem("s-1")); r.status != http.StatusCreated {
		t.Fatalf("first session: %d %s", r.status, r.body)
	}
	r, _ := a.openSession(key, idem("s-2"))
	if r.status != http.StatusPaymentRequired || r.errorCode(t) != "credits_exhausted" {
		t.Errorf("second session with one credit: %d %s", r.status, r.body)
	}
	if r, s := a.openSession(key, idem("s-1")); r.status != http.StatusCreated || !s.IdempotentReplay {
		t.Errorf("replay after credits ran out: %d %s", r.status, r.body)
	}
	key = e.grant("acme", 0, nil)
	if u := e.usage("acme"); u.AllocatedHours != 0 || u.ConsumedHours != 1 || u.RemainingHours != 0 {
		t.Errorf("after lowering the allocation: %+v", u)
	}
	if r, _ := a.openSession(key, idem("s-3")); r.status != http.StatusPaymentRequired {
		t.Errorf("after lowering: %d", r.status)
	}
}

// TestAgreementExpired: 403 on key-authenticated operations after
// valid_until; the 401 of a bad key still comes first.
func TestAgreementExpired(t *testing.T) {
	e := newEnv(t)
	a := e.api()
	end := e.clock.Now().Add(time.Hour)
	key := e.grant("acme", 5, &end)
	r, s := a.openSession(key, idem("before"))
	if r.status != http.StatusCreated {
		t.Fatalf("before the end: %d %s", r.status, r.body)
	}
	e.clock.Advance(time.Hour)
	for _, req := range []request{
		{method: "GET", path: "/api/svc/v1/schema", bearer: key},
		{method: "POST", path: "/api/svc/v1/sessions", bearer: key, idemKey: idem("after")},
		{method: "GET", path: "/api/svc/v1/usage", bearer: key},
		{method: "GET", path: "/api/svc/v1/usage?x=1", bearer: key}, // 403 before the query's 400
	} {
		if r := a.do(req); r.status != http.StatusForbidden || r.errorCode(t) != "agreement_expired" {
			t.Errorf("%s %s: %d %s", req.method, req.path, r.status, r.body)
		}
	}
	if r := a.do(request{method: "GET", path: "/api/svc/v1/usage", bearer: "evk_" + strings.Repeat("A", 43)}); r.status != http.StatusUnauthorized {
		t.Errorf("unknown key after the end: %d", r.status)
	}
	// A session token is not key-authenticated: it lives out its window.
	if r := a.postMetrics(s.Session.Token, idem("m"), exampleBody); r.status != http.StatusUnauthorized {
		t.Errorf("the session opened before the end expired with it at 60 minutes: %d", r.status)
	}
	if u := e.usage("acme"); u.ConsumedHours != 1 {
		t.Errorf("consumed %d, want 1", u.ConsumedHours)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// TestPruneMetrics: a metrics result is replayable for 24 hours; the
// background pruning then frees its key. Its last-success stamp moves only
// when this replica pruned without error: not on an error, and not while
// another replica holds the lock (busy).
func TestPruneMetrics(t *testing.T) {
	e := newEnv(t)
	a := e.api()
	key := e.grant("acme", 3, nil)
	s := a.mustOpenSession(key, idem("day-1"))
	if r := a.postMetrics(s.Session.Token, idem("m"), exampleBody); r.status != http.StatusOK {
		t.Fatalf("metrics: %d %s", r.status, r.body)
	}

	reg := prometheus.NewPedanticRegistry()
	srv, err := server.New(server.Config{Ledger: e.store, Tokens: mustSigner(t, 'k'), Now: e.clock.Now, Random: rand.Reader,
		Logger: slog.New(slog.NewJSONHandler(e.logs, nil)), Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	prune := func() {
		if err := server.PruneOnce(srv, t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// The pruning's metrics, which the chart's alert watches.
	pruneMetrics := func(lastOK time.Time, ok, busy, failed, pruned int) error {
		return testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP evalmeter_prune_last_success_timestamp_seconds When this replica last pruned old metrics results itself without error (not when another replica held the lock), in Unix seconds; 0 before the first time.
# TYPE evalmeter_prune_last_success_timestamp_seconds gauge
evalmeter_prune_last_success_timestamp_seconds %d
# HELP evalmeter_prune_runs_total Hourly prunings of old metrics results by outcome: ok, busy (another replica prunes) or error.
# TYPE evalmeter_prune_runs_total counter
evalmeter_prune_runs_total{result="busy"} %d
evalmeter_prune_runs_total{result="error"} %d
evalmeter_prune_runs_total{result="ok"} %d
# HELP evalmeter_pruned_results_total Metrics results deleted for being older than the retention.
# TYPE evalmeter_pruned_results_total counter
evalmeter_pruned_results_total %d
`, lastOK.Unix(), busy, failed, ok, pruned)), "evalmeter_prune_last_success_timestamp_seconds", "evalmeter_prune_runs_total", "evalmeter_pruned_results_total")
	}

	e.clock.Advance(23 * time.Hour)
	prune()
	s2 := a.mustOpenSession(key, idem("day-2"))
	other := []byte(`{"run_id":"other","cases":[{"case_id":"a","status":"pass","latency_ms":1}]}`)
	if r := a.postMetrics(s2.Session.Token, idem("m"), other); r.status != http.StatusConflict {
		t.Errorf("after 23 h the key still holds its result: %d %s", r.status, r.body)
	}
	e.clock.Advance(2 * time.Hour)
	prune()
	if err := pruneMetrics(e.clock.Now(), 2, 0, 0, 1); err != nil {
		t.Errorf("after two prunings: %v", err)
	}
	lastOK := e.clock.Now()
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	e.clock.Advance(time.Hour)
	if err := server.PruneOnce(srv, canceled); err == nil {
		t.Error("pruning with a canceled context succeeded")
	}
	if err := pruneMetrics(lastOK, 2, 0, 1, 1); err != nil {
		t.Errorf("after a failed pruning, the last success unchanged: %v", err)
	}

	// Another replica holds the lock: busy, which is no success of this
	// replica's (the one holding the lock stamps its own).
	replica, err := pgx.Connect(t.Context(), e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close(context.Background())
	if _, err := replica.Exec(t.Context(), `SELECT pg_advisory_lock($1)`, ledger.PruneLockKey); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	prune()
	if err := pruneMetrics(lastOK, 2, 1, 1, 1); err != nil {
		t.Errorf("while another replica prunes, the last success unchanged: %v", err)
	}
	if _, err := replica.Exec(t.Context(), `SELECT pg_advisory_unlock($1)`, ledger.PruneLockKey); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	prune()
	if err := pruneMetrics(e.clock.Now(), 3, 1, 1, 1); err != nil {
		t.Errorf("once the lock is free again: %v", err)
	}
	s3 := a.mustOpenSession(key, idem("day-2-later"))
	if r := a.postMetrics(s3.Session.Token, idem("m"), other); r.status != http.StatusOK || !strings.HasSuffix(string(r.body), `"idempotent_replay":false}`) {
		t.Errorf("after 25 h the key is free again: %d %s", r.status, r.body)
	}
}
