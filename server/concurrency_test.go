package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evalmeter/evalmeter/internal/logtest"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/server"
)

// TestConcurrentSessionsTwoReplicas: 100 concurrent opens against two API
// instances sharing one database, with 7 credits: exactly 7 sessions.
func TestConcurrentSessionsTwoReplicas(t *testing.T) {
	e := newEnv(t)
	replicas := []*api{e.api(), e.api()}
	key := e.grant("acme", 7, nil)

	const n = 100
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, _ := replicas[i%2].openSession(key, idem(fmt.Sprintf("c-%03d", i)))
			statuses[i] = r.status
		})
	}
	wg.Wait()

	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	if counts[http.StatusCreated] != 7 || counts[http.StatusPaymentRequired] != 93 {
		t.Errorf("statuses %v, want 7 × 201 and 93 × 402", counts)
	}
	if u := e.usage("acme"); u.ConsumedHours != 7 || u.RemainingHours != 0 || u.ActiveSessions != 7 {
		t.Errorf("usage %+v, want 7 consumed", u)
	}
	if sessions, events := ledgerCounts(t, e.url, "acme"); sessions != 7 || events != 7 {
		t.Errorf("%d session rows and %d session credit events, want 7 and 7", sessions, events)
	}
}

// TestConcurrentSameKey: concurrent retries of one operation produce one
// session and one metrics result; all but one are replays.
func TestConcurrentSameKey(t *testing.T) {
	e := newEnv(t)
	replicas := []*api{e.api(), e.api()}
	key := e.grant("acme", 5, nil)

	const n = 20
	var wg sync.WaitGroup
	tokens := make([]string, n)
	replays := make([]bool, n)
	for i := range n {
		wg.Go(func() {
			r, s := replicas[i%2].openSession(key, idem("same-session"))
			if r.status != http.StatusCreated {
				t.Errorf("open %d: %d %s", i, r.status, r.body)
			}
			tokens[i], replays[i] = s.Session.Token, s.IdempotentReplay
		})
	}
	wg.Wait()
	fresh := 0
	for i := range n {
		if tokens[i] != tokens[0] {
			t.Errorf("retry %d got another token", i)
		}
		if !replays[i] {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d of %d retries opened a session, want 1", fresh, n)
	}
	if u := e.usage("acme"); u.ConsumedHours != 1 {
		t.Errorf("consumed %d, want 1", u.ConsumedHours)
	}

	bodies := make([]string, n)
	for i := range n {
		wg.Go(func() {
			r := replicas[i%2].postMetrics(tokens[0], idem("same-metrics"), exampleBody)
			if r.status != http.StatusOK {
				t.Errorf("metrics %d: %d %s", i, r.status, r.body)
			}
			bodies[i] = string(r.body)
		})
	}
	wg.Wait()
	fresh = 0
	for _, b := range bodies {
		if strings.HasSuffix(b, `"idempotent_replay":false}`) {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d of %d concurrent identical metrics requests were not replays, want 1", fresh, n)
	}
}

// TestDatabaseOutage: with PostgreSQL stopped every operation answers 503
// with Retry-After, never 500, and no credit is half-applied; /readyz stays
// 200, so that the pods stay in the Service and clients get these 503s, and
// the outage shows in the metric evalmeter_postgres_up and one log line.
// Once PostgreSQL is back the service resumes.
func TestDatabaseOutage(t *testing.T) {
	cluster := pgtest.NewCluster(t)
	e := newEnvAt(t, cluster.NewDatabase(t))
	a := e.apiWithTimeout(time.Second)
	key := e.grant("acme", 10, nil)
	s := a.mustOpenSession(key, idem("before"))

	registry := prometheus.NewRegistry()
	monitorLog := &logtest.Buffer{}
	monitor, err := server.NewPostgresMonitor(e.store.Ping, time.Second, registry, slog.New(slog.NewJSONHandler(monitorLog, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ops := httptest.NewServer((&server.Ops{Gatherer: registry}).Handler())
	defer ops.Close()
	get := opsGetter(t, ops.URL)
	if err := monitor.Check(t.Context()); err != nil {
		t.Fatalf("PostgreSQL up: %v", err)
	}

	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, req := range []request{
		{method: "GET", path: "/api/svc/v1/schema", bearer: key},
		{method: "POST", path: "/api/svc/v1/sessions", bearer: key, idemKey: idem("during")},
		{method: "POST", path: "/api/svc/v1/metrics", bearer: s.Session.Token, idemKey: idem("m-during"), body: exampleBody},
		{method: "GET", path: "/api/svc/v1/usage", bearer: key},
	} {
		r := a.do(req)
		if r.status != http.StatusServiceUnavailable || r.errorCode(t) != "service_unavailable" || r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s with PostgreSQL down: %d %v %s", req.method, req.path, r.status, r.header, r.body)
		}
		if status, body := get("/readyz"); status != http.StatusOK {
			t.Errorf("/readyz with PostgreSQL down: %d %s; want 200, the pod still answers", status, body)
		}
	}
	for range 2 {
		if err := monitor.Check(t.Context()); err == nil {
			t.Error("the monitor's ping succeeded with PostgreSQL down")
		}
	}
	if _, metrics := get("/metrics"); !strings.Contains(metrics, "evalmeter_postgres_up 0") {
		t.Errorf("/metrics with PostgreSQL down lacks evalmeter_postgres_up 0:\n%s", metrics)
	}
	if n := strings.Count(monitorLog.String(), "PostgreSQL is unreachable"); n != 1 {
		t.Errorf("%d log lines of the outage over two failed pings, want 1:\n%s", n, monitorLog)
	}
	if err := cluster.Restart(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); monitor.Check(t.Context()) != nil && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	if _, metrics := get("/metrics"); !strings.Contains(metrics, "evalmeter_postgres_up 1") {
		t.Errorf("/metrics after the restart lacks evalmeter_postgres_up 1")
	}
	if !strings.Contains(monitorLog.String(), "PostgreSQL is reachable again") {
		t.Errorf("no log line of PostgreSQL's return:\n%s", monitorLog)
	}

	// The retry of the session attempted during the outage opens it once.
	var r response
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if r, _ = a.openSession(key, idem("during")); r.status == http.StatusCreated {
			break
		}
	}
	if r.status != http.StatusCreated || !strings.Contains(string(r.body), `"idempotent_replay":false`) {
		t.Fatalf("after the restart: %d %s", r.status, r.body)
	}
	if r := a.postMetrics(s.Session.Token, idem("m-during"), exampleBody); r.status != http.StatusOK {
		t.Errorf("metrics after the restart: %d %s", r.status, r.body)
	}
	// Checked on a fresh connection: the test's own pool lost its connections too.
	if sessions, events := ledgerCounts(t, e.url, "acme"); sessions != 2 || events != 2 {
		t.Errorf("%d sessions, %d session events after one session before and one after the outage; want 2 and 2", sessions, events)
	}
}

// TestSlowDatabase: a statement that outlives the bound is a 503, and the
// transaction it was part of leaves no trace.
func TestSlowDatabase(t *testing.T) {
	e := newEnv(t)
	a := e.apiWithTimeout(500 * time.Millisecond)
	key := e.grant("acme", 10, nil)

	// Hold the client's row so the credit update waits past the bound.
	unlock := e.lockClient("acme")
	r, _ := a.openSession(key, idem("slow"))
	unlock()
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("with the row locked past the bound: %d %s", r.status, r.body)
	}
	if sessions, _ := ledgerCounts(t, e.url, "acme"); sessions != 0 {
		t.Errorf("%d sessions left behind by the timed-out transaction", sessions)
	}
	if r, s := a.openSession(key, idem("slow")); r.status != http.StatusCreated || s.IdempotentReplay {
		t.Errorf("the retry: %d %s", r.status, r.body)
	}
	if u := e.usage("acme"); u.ConsumedHours != 1 {
		t.Errorf("consumed %d, want 1", u.ConsumedHours)
	}
}

// ledgerCounts reads the session rows and session credit events directly,
// and fails the test unless the client's consumed_hours agrees with both.
func ledgerCounts(t *testing.T, url, clientID string) (sessions, events int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var consumed int
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM sessions WHERE client_id = $1),
		(SELECT count(*) FROM credit_events WHERE client_id = $1 AND kind = 'session'),
		(SELECT consumed_hours FROM clients WHERE client_id = $1)`, clientID).Scan(&sessions, &events, &consumed)
	if err != nil {
		t.Fatal(err)
	}
	if consumed != sessions || consumed != events {
		t.Errorf("consumed_hours %d, %d sessions, %d session events: the ledger disagrees with itself", consumed, sessions, events)
	}
	return sessions, events
}
