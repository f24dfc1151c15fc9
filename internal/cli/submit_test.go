package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
)

// writeRequest writes a small metrics request with this run id.
func writeRequest(t *testing.T, runID string, statuses ...string) string {
	t.Helper()
	var cases []map[string]any
	for i, st := range statuses {
		cases = append(cases, map[string]any{"case_id": fmt.Sprintf("c%d", i), "status": st, "latency_ms": 100 * (i + 1)})
	}
	b, _ := json.Marshal(map[string]any{"run_id": runID, "cases": cases})
	path := filepath.Join(t.TempDir(), runID+".json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func replayed(t *testing.T, stdout string) bool {
	t.Helper()
	var resp struct {
		Replay *bool `json:"idempotent_replay"`
	}
	if err := json.Unmarshal([]byte(stdout), &resp); err != nil || resp.Replay == nil {
		t.Fatalf("stdout is not the service's metrics response: %v\n%s", err, stdout)
	}
	return *resp.Replay
}

// setCachedExpiry rewrites the expiry of the session in the cache, as time
// passing would.
func setCachedExpiry(t *testing.T, cache string, at time.Time) {
	t.Helper()
	b, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	var f cacheFile
	if err := json.Unmarshal(b, &f); err != nil || len(f.Entries) != 1 {
		t.Fatalf("cache file: %v, %d entries", err, len(f.Entries))
	}
	for _, e := range f.Entries {
		e.ExpiresAt = at
	}
	b, _ = json.Marshal(f)
	if err := os.WriteFile(cache, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSubmit(t *testing.T) {
	secret := strings.Repeat("s", 32)
	a := startAPI(t, pgtest.NewDatabase(t), secret)
	a.grant(t, 10)
	cache := filepath.Join(t.TempDir(), "cache", "sessions.json")
	submit := func(args ...string) (int, string, string) {
		t.Helper()
		return evalmeter(t, append([]string{"submit", "--url", a.url, "--cache-file", cache}, args...)...)
	}
	r1, r2, r3 := writeRequest(t, "r1", "pass", "fail"), writeRequest(t, "r2", "pass", "pass"), writeRequest(t, "r3", "pass", "error", "pass", "pass")

	// Three submissions within a window cost one credit.
	for _, r := range []string{r1, r2, r3} {
		status, stdout, stderr := submit("--output", "json", r)
		if status != 0 || replayed(t, stdout) {
			t.Fatalf("submit %s: %d\n%s\n%s", r, status, stdout, stderr)
		}
	}
	if got := a.consumed(t); got != 1 {
		t.Errorf("three submissions consumed %d credits, want 1", got)
	}

	// An identical re-run replays.
	status, stdout, stderr := submit("--output", "json", r1)
	if status != 0 || !replayed(t, stdout) {
		t.Errorf("re-run of r1: %d, not a replay\n%s\n%s", status, stdout, stderr)
	}

	// The cache is the user's only, and holds no credential.
	fi, err := os.Stat(cache)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("cache file mode %v, want 0600", fi.Mode().Perm())
	}
	if dir, _ := os.Stat(filepath.Dir(cache)); dir.Mode().Perm() != 0o700 {
		t.Errorf("cache directory mode %v, want 0700", dir.Mode().Perm())
	}
	content, _ := os.ReadFile(cache)
	for _, secret := range []string{a.key, "evk_", "evs_"} {
		if bytes.Contains(content, []byte(secret)) {
			t.Errorf("the cache file holds %q:\n%s", secret, content)
		}
	}

	// Gates: exit 3 naming the gate that failed; the others pass.
	status, stdout, stderr = submit("--gate", "status.pass_rate>=0.5", "--gate", "latency_ms.p95<=100", r1)
	if status != 3 || !strings.Contains(stderr, "gate latency_ms.p95<=100: FAIL (latency_ms.p95 = 200)") || !strings.Contains(stderr, "gate status.pass_rate>=0.5: pass") {
		t.Errorf("failing gate: %d\n%s\n%s", status, stdout, stderr)
	}
	if !strings.Contains(stdout, "run r1: 2 cases") || !strings.Contains(stdout, "pass 1 (50.0%)") {
		t.Errorf("text summary:\n%s", stdout)
	}
	if status, _, stderr := submit("--gate", "status.pass_rate>=0.5", "--gate", "tool_checks.pass_rate>=0.9", r2); status != 3 || !strings.Contains(stderr, "is null") {
		t.Errorf("a gate on a null rate: %d\n%s", status, stderr)
	}
	if status, _, stderr := submit("--gate", "status.pass_rate>=1", r2); status != 0 {
		t.Errorf("passing gate: %d\n%s", status, stderr)
	}
	// A gate that names no metric is refused before anything is posted.
	for _, g := range []string{"status.pass_ratio>=0.9", "run_id>=1", "status.pass_rate=>0.9"} {
		if status, _, stderr := submit("--gate", g, r2); status != 2 || !strings.Contains(stderr, "--gate") {
			t.Errorf("--gate %s: %d\n%s", g, status, stderr)
		}
	}
	// A request the service would refuse costs nothing: checked locally.
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"run_id":"r","cases":[{"case_id":"a","status":"ok","latency_ms":1}]}`), 0o600)
	if status, _, stderr := submit(bad); status != 1 || !strings.Contains(stderr, "cases[0].status") {
		t.Errorf("invalid request: %d\n%s", status, stderr)
	}
	if got := a.consumed(t); got != 1 {
		t.Errorf("after gates and refusals, %d credits consumed, want 1", got)
	}

	// A session with less than --min-window left, or past its end, is replaced.
	for i, at := range []time.Time{time.Now().Add(2 * time.Minute), time.Now().Add(-time.Hour)} {
		setCachedExpiry(t, cache, at)
		status, stdout, stderr := submit(writeRequest(t, fmt.Sprintf("expiry%d", i), "pass"))
		if status != 0 || !strings.Contains(stdout, "opened for 1 credit") || !strings.Contains(stderr, "opening a session") {
			t.Errorf("cached session ending at %v: %d\n%s\n%s", at, status, stdout, stderr)
		}
		if got, want := a.consumed(t), 2+i; got != want {
			t.Errorf("consumed %d, want %d", got, want)
		}
	}

	status, stdout, _ = evalmeter(t, "usage", "--url", a.url)
	if status != 0 || !strings.Contains(stdout, "client acme: 7 of 10 evaluation-hour credits left (3 consumed)") {
		t.Errorf("usage: %d %s", status, stdout)
	}
}

// TestSubmitRevalidates: a cached session that the service refuses with 401
// is replaced by a new one, once.
func TestSubmitRevalidates(t *testing.T) {
	db := pgtest.NewDatabase(t)
	a := startAPI(t, db, strings.Repeat("s", 32))
	a.grant(t, 10)
	// Through a proxy, so that the base URL, and the cache entry, stay the
	// same when the API behind it restarts with another token secret.
	var target struct {
		sync.Mutex
		url *url.URL
	}
	setTarget := func(raw string) {
		u, _ := url.Parse(raw)
		target.Lock()
		target.url = u
		target.Unlock()
	}
	setTarget(a.url)
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		target.Lock()
		defer target.Unlock()
		r.SetURL(target.url)
	}})
	defer proxy.Close()
	cache := filepath.Join(t.TempDir(), "sessions.json")

	if status, _, stderr := evalmeter(t, "submit", "--url", proxy.URL, "--cache-file", cache, writeRequest(t, "one", "pass")); status != 0 {
		t.Fatalf("submit: %d %s", status, stderr)
	}
	a.stop()
	setTarget(startAPI(t, db, strings.Repeat("t", 32)).url)
	status, stdout, stderr := evalmeter(t, "submit", "--url", proxy.URL, "--cache-file", cache, writeRequest(t, "two", "pass"))
	if status != 0 || !strings.Contains(stderr, "no longer valid; opening another") || !strings.Contains(stdout, "opened for 1 credit") {
		t.Errorf("after the token secret changed: %d\n%s\n%s", status, stdout, stderr)
	}
	if got := a.consumed(t); got != 2 {
		t.Errorf("consumed %d, want 2", got)
	}
}

// TestSubmitOutage: PostgreSQL stops while a session opens, and again while
// the metrics are posted. The submission ends in success after retries,
// with exactly one credit spent.
func TestSubmitOutage(t *testing.T) {
	cluster := pgtest.NewCluster(t)
	db := cluster.NewDatabase(t)
	a := startAPI(t, db, strings.Repeat("s", 32))
	a.grant(t, 10)

	target, _ := url.Parse(a.url)
	var mu sync.Mutex
	outages := map[string]bool{}
	restarted := make(chan error, 2)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		first := r.Method == http.MethodPost && !outages[r.URL.Path]
		if first {
			outages[r.URL.Path] = true
		}
		mu.Unlock()
		if first {
			if err := cluster.Stop(); err != nil {
				t.Errorf("stop PostgreSQL: %v", err)
			}
			time.AfterFunc(3*time.Second, func() { restarted <- cluster.Restart() })
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	status, stdout, stderr := evalmeter(t, "submit", "--url", proxy.URL, "--cache-file", filepath.Join(t.TempDir(), "s.json"), "--output", "json", writeRequest(t, "outage", "pass", "fail"))
	for range 2 {
		if err := <-restarted; err != nil {
			t.Fatalf("restart PostgreSQL: %v", err)
		}
	}
	if status != 0 || replayed(t, stdout) {
		t.Fatalf("submit through two outages: %d\n%s\n%s", status, stdout, stderr)
	}
	if !strings.Contains(stderr, "503 service_unavailable") || !strings.Contains(stderr, "retrying in") {
		t.Errorf("no retry of a 503 reported:\n%s", stderr)
	}
	t.Logf("stderr of the submission:\n%s", stderr)
	if len(outages) != 2 {
		t.Errorf("outages during %v, want both POSTs", outages)
	}
	if got := a.consumed(t); got != 1 {
		t.Errorf("consumed %d credits through the outages, want exactly 1", got)
	}
}

// TestSubmitResumesOpening: a run that dies after the service opened its
// session, before the answer arrived, leaves the Idempotency-Key in the
// cache; the next run replays that opening instead of spending again.
func TestSubmitResumesOpening(t *testing.T) {
	a := startAPI(t, pgtest.NewDatabase(t), strings.Repeat("s", 32))
	a.grant(t, 10)
	target, _ := url.Parse(a.url)
	rp := httputil.NewSingleHostReverseProxy(target)
	var loseAnswers atomic.Bool
	loseAnswers.Store(true)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loseAnswers.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/sessions") {
			rp.ServeHTTP(httptest.NewRecorder(), r) // the session opens; its answer is lost
			<-r.Context().Done()
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	cache := filepath.Join(t.TempDir(), "sessions.json")
	req := writeRequest(t, "resume", "pass")

	status, _, stderr := evalmeter(t, "submit", "--url", proxy.URL, "--cache-file", cache, "--timeout", "2s", req)
	if status != 1 || a.consumed(t) != 1 {
		t.Fatalf("the run that lost its answer: exit %d, %d consumed\n%s", status, a.consumed(t), stderr)
	}
	loseAnswers.Store(false)
	status, stdout, stderr := evalmeter(t, "submit", "--url", proxy.URL, "--cache-file", cache, req)
	if status != 0 || !strings.Contains(stderr, "completing a session opening that an earlier run started") {
		t.Errorf("the next run: %d\n%s\n%s", status, stdout, stderr)
	}
	if got := a.consumed(t); got != 1 {
		t.Errorf("consumed %d credits, want 1: the opening was not replayed", got)
	}
}

// TestSubmitSplit: results of more than 500 cases post as parts in one session.
func TestSubmitSplit(t *testing.T) {
	a := startAPI(t, pgtest.NewDatabase(t), strings.Repeat("s", 32))
	a.grant(t, 10)
	cache := filepath.Join(t.TempDir(), "sessions.json")
	path := writePromptfoo(t, 1100)

	status, stdout, stderr := evalmeter(t, "submit", "--url", a.url, "--cache-file", cache, "--from", "promptfoo", "--split", "--output", "json", path)
	if status != 0 || !strings.Contains(stderr, "1100 cases in 3 parts") {
		t.Fatalf("submit --split: %d\n%s\n%s", status, stdout, stderr)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var resp struct {
			Metrics struct {
				RunID     string `json:"run_id"`
				CaseCount int    `json:"case_count"`
			} `json:"metrics"`
		}
		if err := json.Unmarshal([]byte(line), &resp); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		got = append(got, fmt.Sprintf("%s=%d", resp.Metrics.RunID, resp.Metrics.CaseCount))
	}
	if want := "eval-big-1.p1of3=500 eval-big-1.p2of3=500 eval-big-1.p3of3=100"; strings.Join(got, " ") != want {
		t.Errorf("parts %v, want %s", got, want)
	}
	if got := a.consumed(t); got != 1 {
		t.Errorf("consumed %d, want 1", got)
	}
	if status, _, stderr := evalmeter(t, "submit", "--url", a.url, "--cache-file", cache, "--from", "promptfoo", path); status != 1 || !strings.Contains(stderr, "--split") {
		t.Errorf("1100 cases without --split: %d\n%s", status, stderr)
	}
}

// TestUsageLowCredit: at or below the threshold the operator set, usage and
// submit warn the customer.
func TestUsageLowCredit(t *testing.T) {
	a := startAPI(t, pgtest.NewDatabase(t), strings.Repeat("s", 32))
	threshold := 2
	a.grantWith(t, ledger.Grant{AllocatedHours: 3, LowCreditThreshold: &threshold})
	if status, _, stderr := evalmeter(t, "usage", "--url", a.url); status != 0 || strings.Contains(stderr, "warning") {
		t.Errorf("usage with 3 of 3 left: %d %q, want no warning", status, stderr)
	}
	cache := filepath.Join(t.TempDir(), "sessions.json")
	if status, _, stderr := evalmeter(t, "submit", "--url", a.url, "--cache-file", cache, writeRequest(t, "r1", "pass")); status != 0 {
		t.Fatalf("submit: %d %s", status, stderr)
	}
	status, _, stderr := evalmeter(t, "usage", "--url", a.url)
	if want := "client acme has 2 evaluation-hour credits left, at or below its low-credit threshold of 2"; status != 0 || !strings.Contains(stderr, want) {
		t.Errorf("usage with 2 of 3 left: %d %q, want %q", status, stderr, want)
	}
}

// submit detects the format as convert does, a metrics request being one
// more, and names it in its first line, before anything the content causes.
func TestSubmitDetectsFormat(t *testing.T) {
	// An Inspect log of more than 256 KiB, its prompts making it so: it was
	// refused as payload_too_large when submit took it for a request.
	var log map[string]any
	b, err := os.ReadFile(fixtures + "/inspect/epochs.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &log); err != nil {
		t.Fatal(err)
	}
	for _, s := range log["samples"].([]any) {
		s.(map[string]any)["input"] = strings.Repeat("a long prompt ", 20000)
	}
	big := filepath.Join(t.TempDir(), "big.json")
	if b, err = json.Marshal(log); err != nil || len(b) < 260<<10 {
		t.Fatalf("the log is %d bytes, %v", len(b), err)
	}
	if err := os.WriteFile(big, b, 0o600); err != nil {
		t.Fatal(err)
	}
	request := writeRequest(t, "r1", "pass", "fail")
	tests := []struct {
		name      string
		args      []string
		status    int
		firstLine string
		stderr    string // further in stderr
	}{
		{"junit", []string{fixtures + "/junit/pytest.xml"}, 0, fixtures + "/junit/pytest.xml: junit results (detected)", "dry run"},
		{"large inspect log", []string{big}, 0, big + ": inspect results (detected)", "dry run"},
		{"named", []string{"--from", "promptfoo", fixtures + "/promptfoo/v3.json", fixtures + "/promptfoo/v3_second.json"}, 0, "2 files: promptfoo results (--from)", "dry run"},
		{"request", []string{request}, 0, request + ": a metrics request (detected), posted as it is", "dry run"},
		{"request named", []string{"--from", "request", request}, 0, request + ": a metrics request (--from), posted as it is", "dry run"},
		{"request with a run id", []string{"--run-id", "x", request}, 2, request + ": a metrics request (detected)", "no --run-id, --hash-ids or --split"},
		{"two requests", []string{request, request}, 2, "submit: " + request + " is a metrics request: submit it on its own", ""},
		{"undetectable", []string{fixtures + "/junit/not_junit.xml"}, 2, "cannot tell which tool wrote it, nor is it a metrics request; name the format with --from", ""},
		{"a request named junit", []string{"--from", "junit", request}, 2, request + ": junit results (--from)", "it is a metrics request (evalmeter submit posts it as it is, without --from)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, stderr := evalmeter(t, append([]string{"submit", "--dry-run"}, tt.args...)...)
			first, rest, _ := strings.Cut(stderr, "\n")
			if status != tt.status || !strings.Contains(first, tt.firstLine) || !strings.Contains(rest, tt.stderr) {
				t.Errorf("status %d, want %d; first line %q, want it to hold %q; then %q, want %q", status, tt.status, first, tt.firstLine, rest, tt.stderr)
			}
		})
	}
}
