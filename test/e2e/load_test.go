//go:build e2e

package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/polltest"
)

// A customer's load on the API, recorded request by request so that
// checkLedger can hold the ledger to what the client was told: the failover
// test (ha_test.go) and the upgrade test (upgrade_test.go) run it while they
// break or replace what serves it.

// loadShape is a load: session opens with distinct Idempotency-Keys, each
// retried until it gets a 201 or a 402; replays of acknowledged opens; and
// metrics posts with acknowledged sessions, each key retried until it is
// answered.
type loadShape struct {
	prefix string // of every Idempotency-Key
	// attempts distinct keys try to open a session, more than the credits.
	// The first paced are first tried over period, so that sessions are
	// charged all through the load; the others race for the last credits
	// right after. With attempts 0, a new key is tried every openEvery
	// until the load stops.
	attempts  int
	paced     int
	period    time.Duration
	openEvery time.Duration
	// Keys are retried until this long after the start, at most.
	resolveWithin time.Duration
	metrics       []byte // the body of each metrics post
	// How many goroutines open, replay and post metrics: 8, 2 and 4 when 0.
	openers, replayers, posters int
}

// loadValues are helm's flags for the suites that load the API (failover,
// upgrade, restore): image, two API replicas serving TLS with the Secret
// evalmeter-tls on the node port hack/e2e.sh publishes; with cnpg, the
// ledger on a CloudNativePG Cluster sized for kind. extra follows.
func loadValues(e kindEnv, ns, image string, cnpg bool, extra ...string) []string {
	repository, tag := splitImage(image)
	v := []string{"--namespace", ns, "--wait", "--timeout", "10m",
		"--set-string", "image.repository=" + repository, "--set-string", "image.tag=" + tag,
		"--set", "image.pullPolicy=IfNotPresent",
		"--set", "api.replicas=2",
		"--set", "api.service.type=NodePort", "--set", "api.service.nodePort=" + e.nodePort,
		"--set", "api.service.port=443", "--set-string", "api.tlsSecret=evalmeter-tls",
		"--set-string", "controller.resync=2s",
	}
	if cnpg {
		v = append(v, "--set", "postgresql.cnpg.enabled=true",
			"--set-string", "postgresql.cnpg.storage.size=1Gi",
			"--set-string", "postgresql.cnpg.resources.requests.cpu=100m",
			"--set-string", "postgresql.cnpg.resources.requests.memory=256Mi",
			"--set-string", "postgresql.cnpg.resources.limits.memory=512Mi")
		if image := os.Getenv("E2E_CNPG_POSTGRES_IMAGE"); image != "" {
			v = append(v, "--set-string", "postgresql.cnpg.imageName="+image)
		}
	}
	return append(v, extra...)
}

// loadAgreement applies a ClientAgreement name (its clientID too) of credits,
// valid for a day, waits until it is Active, and returns its API key.
func loadAgreement(t *testing.T, e kindEnv, ns, name, order string, credits int) string {
	t.Helper()
	kubectl := func(args ...string) string { t.Helper(); return e.run(t, nil, e.kubectl, args...) }
	validUntil := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	e.run(t, []byte(fmt.Sprintf(`apiVersion: evalmeter.io/v1alpha1
kind: ClientAgreement
metadata:
  name: %s
spec:
  clientID: %s
  allocatedHours: %d
  validUntil: %q
  orderReference: %s
`, name, name, credits, validUntil, order)), e.kubectl, "-n", ns, "apply", "-f", "-")
	polltest.Until(t, 60*time.Second, "the agreement Active", func() error {
		if got := kubectl("-n", ns, "get", "clientagreement", name, "-o", "jsonpath={.status.phase}"); got != "Active" {
			return fmt.Errorf("phase %q", got)
		}
		return nil
	})
	return secretKey(t, kubectl, ns, name+"-api-key")
}

// newLoadClient is a client of the API at e.apiURL, which serves a
// certificate roots trusts, that records every request; it waits until the
// API serves. Its requests give up after 20 s, and connecting after 5.
func newLoadClient(t *testing.T, e kindEnv, roots *x509.CertPool) (*loadClient, *http.Transport) {
	t.Helper()
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 32,
	}
	c := &loadClient{
		client: &http.Client{Timeout: 20 * time.Second, Transport: transport},
		url:    e.apiURL + "/api/svc/v1",
		h:      &history{},
	}
	endpoint{url: c.url, client: c.client}.waitUntilServing(t)
	return c, transport
}

// exampleRequest is the metrics request the load posts.
func exampleRequest(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "api", "examples", "metrics-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// load is a running load.
type load struct {
	c        *loadClient
	t0       time.Time
	stopping atomic.Bool // the replays and metrics posts end
	workers  sync.WaitGroup
	openers  sync.WaitGroup
}

// startLoad starts s against c's API with apiKey.
func startLoad(c *loadClient, apiKey string, s loadShape) *load {
	l := &load{c: c, t0: time.Now()}
	or := func(n, otherwise int) int {
		if n == 0 {
			return otherwise
		}
		return n
	}
	keys := make(chan string)
	go func() { // the pacer
		defer close(keys)
		for i := 0; s.attempts == 0 || i < s.attempts; i++ {
			switch {
			case s.attempts == 0 && l.stopping.Load():
				return
			case s.attempts == 0:
				time.Sleep(s.openEvery)
			case i < s.paced:
				time.Sleep(time.Until(l.t0.Add(s.period * time.Duration(i) / time.Duration(s.paced))))
			}
			keys <- fmt.Sprintf("%s-open-%04d", s.prefix, i)
		}
	}()
	resolveBy := l.t0.Add(s.resolveWithin)
	for range or(s.openers, 8) {
		l.openers.Add(1)
		go func() {
			defer l.openers.Done()
			for key := range keys {
				untilAnswered(resolveBy, func(attempt int) op { return c.openSession(apiKey, key, attempt, opOpen) })
			}
		}()
	}
	for range or(s.replayers, 2) { // replays of acknowledged opens
		l.workers.Add(1)
		go func() {
			defer l.workers.Done()
			for !l.stopping.Load() {
				if o, ok := c.randomSession(); ok {
					c.openSession(apiKey, o.key, 1, opReplay)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	for w := range or(s.posters, 4) { // metrics posts, each key retried until answered
		l.workers.Add(1)
		go func() {
			defer l.workers.Done()
			for n := 0; !l.stopping.Load(); n++ {
				o, ok := c.randomSession()
				if !ok {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				key := fmt.Sprintf("%s-metrics-%d-%05d", s.prefix, w, n)
				untilAnswered(resolveBy, func(attempt int) op { return c.postMetrics(o.token, key, attempt, s.metrics) })
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	return l
}

// stop ends the replays and metrics posts (and, with attempts 0, the
// opens), waits until every key tried is answered, and returns when the load
// ended.
func (l *load) stop() time.Time {
	l.stopping.Store(true)
	l.workers.Wait()
	l.openers.Wait()
	return time.Now()
}

// untilAnswered calls do with attempt 1, 2, ... every half second while the
// service is unavailable (a 503, or no answer) and deadline has not passed:
// anything else settles the key, and checkLedger judges it.
func untilAnswered(deadline time.Time, do func(attempt int) op) {
	for attempt := 1; do(attempt).failed() && time.Now().Before(deadline); attempt++ {
		time.Sleep(500 * time.Millisecond)
	}
}

// loadClient makes the load's requests and records each in h.
type loadClient struct {
	client *http.Client
	url    string // ending in /api/svc/v1
	h      *history

	mu      sync.Mutex
	acked   []op // the first 201 of each key
	seen    map[string]bool
	metrics map[string]string // the Idempotency-Key of each 200 of POST /metrics -> its session token
}

func (c *loadClient) openSession(apiKey, key string, attempt int, kind string) op {
	o := c.post(kind, "/sessions", apiKey, key, attempt, nil)
	if o.status == 201 {
		c.mu.Lock()
		if !c.seen[o.key] {
			if c.seen == nil {
				c.seen = map[string]bool{}
			}
			c.seen[o.key] = true
			c.acked = append(c.acked, o)
		}
		c.mu.Unlock()
	}
	return o
}

func (c *loadClient) postMetrics(token, key string, attempt int, body []byte) op {
	o := c.post(opMetrics, "/metrics", token, key, attempt, body)
	if o.status == 200 {
		c.mu.Lock()
		if c.metrics == nil {
			c.metrics = map[string]string{}
		}
		c.metrics[key] = token
		c.mu.Unlock()
	}
	return o
}

// randomSession is one of the sessions acknowledged so far.
func (c *loadClient) randomSession() (op, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.acked) == 0 {
		return op{}, false
	}
	return c.acked[rand.IntN(len(c.acked))], true
}

func (c *loadClient) sessions() []op {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]op(nil), c.acked...)
}

func (c *loadClient) post(kind, path, bearer, key string, attempt int, body []byte) op {
	o := op{kind: kind, key: key, attempt: attempt, start: time.Now()}
	defer func() { o.end = time.Now(); c.h.add(o) }()
	req, err := http.NewRequest(http.MethodPost, c.url+path, bytes.NewReader(body))
	if err != nil {
		o.err = err.Error()
		return o
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Idempotency-Key", key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		o.err = err.Error()
		return o
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		o.err = err.Error()
		return o
	}
	o.status, o.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	var refusal api.ErrorEnvelope
	var opened api.SessionEnvelope
	if json.Unmarshal(b, &refusal) == nil && json.Unmarshal(b, &opened) == nil {
		o.code, o.sessionID, o.token, o.replay = refusal.Error.Code, opened.Session.ID, opened.Session.Token, opened.IdempotentReplay
	}
	return o
}

// readLedger reads what PostgreSQL holds for clientID, through psql: a
// function that runs one statement and returns its rows unaligned, fields
// separated by |.
func readLedger(t *testing.T, psql func(sql string) string, clientID string) ledgerState {
	t.Helper()
	query := func(sql string) [][]string {
		t.Helper()
		out := psql(sql)
		var rows [][]string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if line != "" {
				rows = append(rows, strings.Split(line, "|"))
			}
		}
		return rows
	}
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("ledger: %q is not a number", s)
		}
		return n
	}
	l := ledgerState{sessions: map[string]string{}, metricsKeys: map[string]bool{}}
	// psql's -c does not interpolate variables: the test's own id, as a literal.
	lit := "'" + strings.ReplaceAll(clientID, "'", "''") + "'"
	row := query("SELECT allocated_hours, consumed_hours FROM clients WHERE client_id = " + lit)
	if len(row) != 1 || len(row[0]) != 2 {
		t.Fatalf("ledger: client %s: %q", clientID, row)
	}
	l.allocated, l.consumed = atoi(row[0][0]), atoi(row[0][1])
	for _, r := range query("SELECT idempotency_key, id FROM sessions WHERE client_id = " + lit) {
		l.sessions[r[0]] = r[1]
	}
	row = query("SELECT count(*), count(DISTINCT session_id) FROM credit_events WHERE kind = 'session' AND client_id = " + lit)
	l.sessionEvents, l.chargedSessions = atoi(row[0][0]), atoi(row[0][1])
	for _, r := range query("SELECT idempotency_key FROM metrics_requests WHERE client_id = " + lit) {
		l.metricsKeys[r[0]] = true
	}
	return l
}
