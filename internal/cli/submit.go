package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/client"
	"github.com/evalmeter/evalmeter/convert"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// EnvAPIKey and EnvURL name the environment variables of the client commands.
const (
	EnvAPIKey = "EVALMETER_API_KEY"
	EnvURL    = "EVALMETER_URL"
)

const submitUsage = `submit --url BASE [--from FORMAT|request] [--output text|json] [--gate EXPR]... [--save-result FILE] [--receipt FILE] [--dry-run] FILE...

Converts the results files, or takes a metrics request file as it is,
checks the request locally, and posts it through a session. The format is
detected as convert detects it, a metrics request being one more; the first
line on standard error names it, and --from names it instead. The
client's open session is reused while --min-window of it is left, so that
several submissions within its hour cost one credit. The API key comes from
EVALMETER_API_KEY or --api-key-file.

In CI (GitHub Actions, GitLab CI, Buildkite, Jenkins) the job's commit,
branch and pipeline id are read from the CI's variables into the result file
(never into the request), and the default run id names the commit.

Exit status: 0 posted and every gate passed; 1 the request or the service
refused it; 2 a file or the command line is wrong; 3 a gate failed.`

// clientFlags are the flags of the commands that call the API.
type clientFlags struct {
	url, keyFile string
	timeout      time.Duration
}

func (cf *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&cf.url, "url", EnvOr(EnvURL, ""), "base URL of the evalmeter API, e.g. https://evalmeter.example.com (env "+EnvURL+")")
	fs.StringVar(&cf.keyFile, "api-key-file", "", "file holding the API key; else env "+EnvAPIKey)
	fs.DurationVar(&cf.timeout, "timeout", 5*time.Minute, "bound on the whole command, retries included")
}

// client returns an API client with the key from the file or the environment,
// never from a flag value, which other users of the machine could read.
func (cf *clientFlags) client(stderr io.Writer, cmd string) (*client.Client, string, error) {
	if cf.url == "" {
		return nil, "", fmt.Errorf("set --url or %s to the API's base URL", EnvURL)
	}
	key := os.Getenv(EnvAPIKey)
	if cf.keyFile != "" {
		b, err := os.ReadFile(cf.keyFile)
		if err != nil {
			return nil, "", fmt.Errorf("--api-key-file: %v", err)
		}
		key = strings.TrimSpace(string(b))
	}
	if key == "" {
		return nil, "", fmt.Errorf("set %s, or --api-key-file, to your API key", EnvAPIKey)
	}
	c, err := client.New(cf.url, key)
	if err != nil {
		return nil, "", err
	}
	c.Retry.Notify = func(err error, wait time.Duration) {
		fmt.Fprintf(stderr, "evalmeter %s: %v; retrying in %s\n", cmd, err, wait.Round(100*time.Millisecond))
	}
	return c, key, nil
}

// submitCmd is evalmeter submit (docs/design.md#112-convert-and-submit).
func submitCmd(args []string, stdout, stderr io.Writer) int {
	fs := NewFlagSet("submit", submitUsage, stderr)
	var rf requestFlags
	rf.register(fs, "auto")
	fs.Lookup("from").Usage = "results format: " + strings.Join(convert.Formats(), ", ") + "; " + convert.FormatRequest + " (a metrics request, posted as it is); or auto"
	fs.BoolVar(&rf.split, "split", false, "post more than 500 cases, or more than 256 KiB, as parts RUN.p1ofN, RUN.p2ofN, ... (each part's metrics are its own)")
	var cf clientFlags
	cf.register(fs)
	output := fs.String("output", "text", "text: a summary; json: the service's response body (one line per part)")
	minWindow := fs.Duration("min-window", 5*time.Minute, "reuse the open session while at least this much of its window is left")
	cachePath := fs.String("cache-file", "", "the session cache (default: env "+EnvCacheFile+", else the user's cache directory)")
	var gates gateFlags
	fs.Var(&gates, "gate", "fail with exit status 3 unless METRIC OP NUMBER holds, e.g. status.pass_rate>=0.95 (repeatable)")
	savePath := fs.String("save-result", "", "write the request(s) and the service's response(s) (with --dry-run, the requests alone) to this file, for evalmeter compare and as a CI artifact")
	receiptPath := fs.String("receipt", "", "write the service's signed answer, the receipt a third party checks with evalmeter verify, to this file (FILE-1, FILE-2, ... for a split run)")
	dryRun := fs.Bool("dry-run", false, "convert and check the request, print the metrics computed here, and post nothing: no credit is spent")
	if status, ok := ParseFlags(fs, args); !ok {
		return status
	}
	if fs.NArg() == 0 {
		return Failf(stderr, "submit: name the results file(s) or a metrics request file, e.g. evalmeter submit report.xml")
	}
	if *output != "text" && *output != "json" {
		return Failf(stderr, "submit: --output %q: use text or json", *output)
	}
	if *minWindow < 0 || *minWindow > 55*time.Minute {
		return Failf(stderr, "submit: --min-window must be between 0 and 55m")
	}
	if status := detectFormat(&rf, fs.Args(), stderr); status != 0 {
		return status
	}
	ci := detectCI(os.Getenv)
	if ci != nil {
		fmt.Fprintf(stderr, "evalmeter submit: CI %s, commit %s, branch %s, pipeline %s\n", ci.System, orNone(ci.Commit), orNone(ci.Branch), orNone(ci.Pipeline))
		if rf.from != convert.FormatRequest && rf.runID == "" {
			rf.runID = ci.runID()
		}
	}

	bodies, runID, status := requestBodies(&rf, fs.Args(), stderr)
	if status != 0 {
		return status
	}
	// Check everything locally before any credit is spent.
	type part struct {
		body  []byte
		local *api.Metrics
	}
	parts := make([]part, len(bodies))
	for i, body := range bodies {
		m, merr := checkRequest(body)
		if merr != nil {
			fmt.Fprintf(stderr, "evalmeter submit: the service would refuse the request: %s %s", merr.Code, merr.Message)
			if merr.Field != "" {
				fmt.Fprintf(stderr, " (%s)", merr.Field)
			}
			fmt.Fprintln(stderr)
			return 1
		}
		parts[i] = part{body, m}
	}
	for _, g := range gates {
		if _, err := g.lookup(parts[0].local); err != nil {
			return Failf(stderr, "submit: %v", err)
		}
	}
	var out *resultFile
	if *savePath != "" {
		var err error
		if out, err = createResult(*savePath); err != nil {
			return Failf(stderr, "submit: %v", err)
		}
		defer out.abort()
	}
	var receipts []*resultFile
	if *receiptPath != "" {
		if *dryRun {
			return Failf(stderr, "submit: --receipt keeps the service's signed answer, which a dry run does not ask for")
		}
		for i := range parts {
			f, err := createFile("--receipt", numbered(*receiptPath, i, len(parts)))
			if err != nil {
				return Failf(stderr, "submit: %v", err)
			}
			defer f.abort()
			receipts = append(receipts, f)
		}
	}
	saved := &savedResult{Format: resultFormat, RunID: runID, CI: ci, DryRun: *dryRun}
	// post answers a part: the service's answer, or on a dry run the
	// metrics computed here.
	var post func(p part) (*client.MetricsResult, *cachedSession, error)
	var rc *receiptChecker
	now := time.Now
	if *dryRun {
		fmt.Fprintln(stderr, "evalmeter submit: dry run: computed here, nothing posted, no credit spent")
		post = func(p part) (*client.MetricsResult, *cachedSession, error) {
			body, err := json.Marshal(map[string]any{"metrics": p.local})
			return &client.MetricsResult{Metrics: *p.local, Body: body}, nil, err
		}
	} else {
		c, apiKey, err := cf.client(stderr, "submit")
		if err != nil {
			return Failf(stderr, "submit: %v", err)
		}
		if *cachePath == "" {
			if *cachePath, err = defaultCachePath(); err != nil {
				return Failf(stderr, "submit: %v", err)
			}
		}
		cache, err := openSessionCache(*cachePath, c.BaseURL(), apiKey)
		if err != nil {
			return Failf(stderr, "submit: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
		defer cancel()
		s := &submitter{client: c, cache: cache, now: time.Now, minWindow: *minWindow, stderr: stderr}
		post = func(p part) (*client.MetricsResult, *cachedSession, error) {
			return s.post(ctx, p.body, p.local.Integrity.CanonicalSHA256)
		}
		rc = &receiptChecker{base: c.BaseURL(), stderr: stderr}
		saved.Service, now = c.BaseURL(), s.now
	}

	gateFailed := false
	for i, p := range parts {
		res, sess, err := post(p)
		if err != nil {
			fmt.Fprintf(stderr, "evalmeter submit: %s\n", describe(err))
			return 1
		}
		if receipts != nil {
			if err := receipts[i].commit(res.Receipt); err != nil {
				return Failf(stderr, "submit: %v", err)
			}
			rc.check(res.Receipt, receipts[i].path)
		}
		rp := resultPart{Request: p.body}
		if !*dryRun {
			rp.Response = res.Body
		}
		saved.Parts = append(saved.Parts, rp)
		if *output == "json" {
			stdout.Write(append(res.Body, '\n'))
		} else {
			printSummary(stdout, res, sess, now())
		}
		gateFailed = checkGates(gates, &res.Metrics, stderr) || gateFailed
	}
	if out != nil {
		saved.SavedAt = now().UTC()
		if err := out.commit(saved); err != nil {
			return Failf(stderr, "submit: %v", err)
		}
		what := "the requests and the service's answers"
		if *dryRun {
			what = "the requests (a dry run: no answer of the service)"
		}
		fmt.Fprintf(stderr, "evalmeter submit: %s are in %s\n", what, *savePath)
	}
	if gateFailed {
		return 3
	}
	return 0
}

// checkGates prints each gate's outcome on m and reports whether one failed.
func checkGates(gates gateFlags, m *api.Metrics, stderr io.Writer) bool {
	failed := false
	for _, g := range gates {
		line, ok, err := g.check(m)
		if err != nil { // lookup succeeded on the same shape before posting
			line, ok = "gate "+g.expr+": "+err.Error(), false
		}
		fmt.Fprintln(stderr, "evalmeter submit: "+line)
		failed = failed || !ok
	}
	return failed
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// detectFormat settles rf.from, detecting it when it is auto, and names it
// in submit's first line: a user who gave the wrong file learns it there,
// before any error of the content.
func detectFormat(rf *requestFlags, paths []string, stderr io.Writer) int {
	how := "--from"
	if rf.from == "" || rf.from == "auto" {
		from, err := convert.DetectFiles(paths)
		if err != nil {
			return Failf(stderr, "submit: %v", err)
		}
		rf.from, how = from, "detected"
	}
	files := paths[0]
	if len(paths) > 1 {
		files = fmt.Sprintf("%d files", len(paths))
	}
	if rf.from != convert.FormatRequest {
		fmt.Fprintf(stderr, "evalmeter submit: %s: %s results (%s)\n", files, rf.from, how)
		return 0
	}
	fmt.Fprintf(stderr, "evalmeter submit: %s: a metrics request (%s), posted as it is\n", files, how)
	if len(paths) != 1 || rf.runID != "" || rf.hashIDs || rf.split {
		return Failf(stderr, "submit: a metrics request is posted as it is: give that one file, and no --run-id, --hash-ids or --split (they apply to a tool's results)")
	}
	return 0
}

// requestBodies returns the request(s) to post, the converted results or the
// metrics request file as it is, and the run's id before any split.
func requestBodies(rf *requestFlags, paths []string, stderr io.Writer) ([][]byte, string, int) {
	if rf.from == convert.FormatRequest {
		f, err := os.Open(paths[0])
		if err != nil {
			fmt.Fprintf(stderr, "evalmeter submit: %v\n", err)
			return nil, "", 2
		}
		defer f.Close()
		body, err := io.ReadAll(io.LimitReader(f, metrics.MaxBodyBytes+1))
		if err != nil {
			fmt.Fprintf(stderr, "evalmeter submit: %v\n", err)
			return nil, "", 2
		}
		var head struct {
			RunID string `json:"run_id"`
		}
		json.Unmarshal(body, &head) // checked before posting
		return [][]byte{body}, head.RunID, 0
	}
	opts, err := rf.options()
	if err != nil {
		return nil, "", Failf(stderr, "submit: %v", err)
	}
	res, status := convertFiles("submit", paths, opts, stderr)
	if status != 0 {
		return nil, "", status
	}
	reqs := []convert.Request{res.Request}
	if rf.split {
		if reqs, err = res.Request.Parts(); err != nil {
			return nil, "", Failf(stderr, "submit: %v", err)
		}
	}
	bodies := make([][]byte, len(reqs))
	for i := range reqs {
		if bodies[i], err = reqs[i].Marshal(); err != nil {
			return nil, "", Failf(stderr, "submit: %v", err)
		}
	}
	if len(reqs) > 1 {
		fmt.Fprintf(stderr, "evalmeter submit: %d cases in %d parts, %s to %s\n", len(res.Request.Cases), len(reqs), reqs[0].RunID, reqs[len(reqs)-1].RunID)
	}
	return bodies, res.Request.RunID, 0
}

// submitter posts metrics requests through the client's open session,
// opening one when none has enough of its window left.
type submitter struct {
	client    *client.Client
	cache     *sessionCache
	now       func() time.Time
	minWindow time.Duration
	stderr    io.Writer
}

// post posts one request. Its Idempotency-Key is derived from the request's
// canonical digest, so an identical re-run replays the stored result.
func (s *submitter) post(ctx context.Context, body []byte, digest string) (*client.MetricsResult, *cachedSession, error) {
	key := "evalmeter-m-" + digest
	for attempt := 0; ; attempt++ {
		sess, err := s.session(ctx)
		if err != nil {
			return nil, nil, err
		}
		res, err := s.client.PostMetrics(ctx, sess.token, key, body)
		var apiErr *client.Error
		if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized && attempt == 0 {
			// The session ended earlier than the cache knew (a clock apart,
			// a rotated secret): forget it and open another, once.
			fmt.Fprintf(s.stderr, "evalmeter submit: the cached session %s is no longer valid; opening another\n", sess.id)
			if err := s.cache.store(&cacheEntry{BaseURL: s.client.BaseURL()}, s.now()); err != nil {
				return nil, nil, err
			}
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		return res, sess, nil
	}
}

type cachedSession struct {
	id, token string
	expiresAt time.Time
	opened    bool // by this run
}

// session returns the cached session while enough of its window is left,
// else opens one, spending a credit.
func (s *submitter) session(ctx context.Context) (*cachedSession, error) {
	e, err := s.cache.load()
	if err != nil {
		return nil, err
	}
	if e.SessionID != "" && e.ExpiresAt.Sub(s.now()) >= s.minWindow {
		if token, ok := s.cache.openToken(e); ok {
			return &cachedSession{id: e.SessionID, token: token, expiresAt: e.ExpiresAt}, nil
		}
	}

	for {
		if e.PendingKey == "" {
			u, err := s.client.Usage(ctx)
			if err != nil {
				return nil, err
			}
			if u.RemainingHours == 0 {
				return nil, fmt.Errorf("client %s has no evaluation-hour credit left (%d of %d used); ask your operator for more", u.ClientID, u.ConsumedHours, u.AllocatedHours)
			}
			fmt.Fprintf(s.stderr, "evalmeter submit: opening a session: 1 evaluation-hour credit of the %d that client %s has left\n", u.RemainingHours, u.ClientID)
			warnLowCredit(s.stderr, "submit", u)
			// The key is on disk before the request: if this run dies before
			// the answer, the next one replays the opening instead of paying again.
			e = &cacheEntry{BaseURL: s.client.BaseURL(), PendingKey: client.NewIdempotencyKey()}
			if err := s.cache.store(e, s.now()); err != nil {
				return nil, err
			}
		} else {
			fmt.Fprintln(s.stderr, "evalmeter submit: completing a session opening that an earlier run started (no new credit if it went through)")
		}
		sess, err := s.client.OpenSession(ctx, e.PendingKey)
		var apiErr *client.Error
		if errors.As(err, &apiErr) && apiErr.StatusCode < 500 {
			// Refused: no session was made under this key.
			s.cache.store(&cacheEntry{BaseURL: s.client.BaseURL()}, s.now())
			return nil, err
		}
		if err != nil {
			return nil, err // the pending key stays for the next run
		}
		if sess.ExpiresAt.Sub(s.now()) < s.minWindow {
			// The replayed opening of an old run: its window is spent.
			e = &cacheEntry{}
			continue
		}
		e = &cacheEntry{
			BaseURL:     s.client.BaseURL(),
			SessionID:   sess.ID,
			SealedToken: s.cache.sealToken(sess.ID, sess.Token),
			ExpiresAt:   sess.ExpiresAt,
		}
		if err := s.cache.store(e, s.now()); err != nil {
			return nil, err
		}
		return &cachedSession{id: sess.ID, token: sess.Token, expiresAt: sess.ExpiresAt, opened: true}, nil
	}
}

// describe words an API error for the user, with what to do.
func describe(err error) string {
	var e *client.Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	hint := ""
	switch e.StatusCode {
	case http.StatusUnauthorized:
		hint = "; check the API key (EVALMETER_API_KEY or --api-key-file) and --url"
	case http.StatusPaymentRequired:
		hint = "; ask your operator for more evaluation-hour credits"
	case http.StatusForbidden:
		hint = "; your agreement has ended: ask your operator"
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		hint = "; the service is unavailable: run the same command again later, it will not spend twice"
	}
	return "the service answered " + e.Error() + hint
}

// printSummary prints a metrics result for a person.
func printSummary(w io.Writer, res *client.MetricsResult, sess *cachedSession, now time.Time) {
	m := &res.Metrics
	pct := func(r float64) string { return fmt.Sprintf("%.1f%%", 100*r) }
	optPct := func(r *float64) string {
		if r == nil {
			return "n/a"
		}
		return pct(*r)
	}
	st := m.Status
	fmt.Fprintf(w, "run %s: %d cases\n", m.RunID, m.CaseCount)
	fmt.Fprintf(w, "  status        pass %d (%s), fail %d (%s), error %d (%s), timeout %d (%s)\n",
		st.Counts.Pass, pct(st.PassRate), st.Counts.Fail, pct(st.FailureRate), st.Counts.Error, pct(st.ErrorRate), st.Counts.Timeout, pct(st.TimeoutRate))
	fmt.Fprintf(w, "  latency       p50 %g ms, p95 %g ms, max %g ms\n", m.LatencyMS.P50, m.LatencyMS.P95, m.LatencyMS.Max)
	if m.TokensReported.Cases > 0 {
		fmt.Fprintf(w, "  tokens        %d in, %d out (%d cases)\n", m.TokensReported.Input, m.TokensReported.Output, m.TokensReported.Cases)
	}
	if m.CostReported.Currency != nil {
		fmt.Fprintf(w, "  cost          %g %s (%d cases)\n", m.CostReported.Total, *m.CostReported.Currency, m.CostReported.Cases)
	}
	if m.ToolChecks.Total > 0 {
		fmt.Fprintf(w, "  tool checks   %d of %d passed (%s)\n", m.ToolChecks.Passed, m.ToolChecks.Total, optPct(m.ToolChecks.PassRate))
	}
	if m.RepeatStability.EligibleGroups > 0 {
		fmt.Fprintf(w, "  repeats       %d of %d groups stable (%s)\n", m.RepeatStability.StableGroups, m.RepeatStability.EligibleGroups, optPct(m.RepeatStability.StabilityRate))
	}
	if m.TraceCompleteness.Cases > 0 {
		fmt.Fprintf(w, "  trace         %d of %d expected steps observed (%s)\n", m.TraceCompleteness.ObservedSteps, m.TraceCompleteness.ExpectedSteps, optPct(m.TraceCompleteness.CompletenessRate))
	}
	if m.BoundaryViolations.Total > 0 {
		fmt.Fprintf(w, "  boundary      %d violations in %d cases\n", m.BoundaryViolations.Total, m.BoundaryViolations.CasesAffected)
	}
	if sess == nil {
		fmt.Fprintf(w, "  sha256        %s (computed here)\n", m.Integrity.CanonicalSHA256)
		return
	}
	replay := ""
	if res.Replay {
		replay = " (replayed: this exact request was posted before)"
	}
	fmt.Fprintf(w, "  sha256        %s%s\n", m.Integrity.CanonicalSHA256, replay)
	how := "reused, no credit spent"
	if sess.opened {
		how = "opened for 1 credit"
	}
	fmt.Fprintf(w, "  session       %s (%s), %d min left\n", sess.id, how, int(sess.expiresAt.Sub(now).Minutes()))
}

const usageUsage = `usage --url BASE [--output text|json]

Prints the client's evaluation-hour credits: allocated, consumed, remaining,
and the sessions open now. It spends no credit.`

// usageCmd is evalmeter usage.
func usageCmd(args []string, stdout, stderr io.Writer) int {
	fs := NewFlagSet("usage", usageUsage, stderr)
	var cf clientFlags
	cf.register(fs)
	output := fs.String("output", "text", "text or json")
	if status, ok := ParseFlags(fs, args); !ok {
		return status
	}
	if fs.NArg() > 0 {
		return Failf(stderr, "%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	if *output != "text" && *output != "json" {
		return Failf(stderr, "usage: --output %q: use text or json", *output)
	}
	c, _, err := cf.client(stderr, "usage")
	if err != nil {
		return Failf(stderr, "usage: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	u, err := c.Usage(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "evalmeter usage: %s\n", describe(err))
		return 1
	}
	warnLowCredit(stderr, "usage", u)
	if *output == "json" {
		json.NewEncoder(stdout).Encode(map[string]any{"usage": u})
		return 0
	}
	fmt.Fprintf(stdout, "client %s: %d of %d evaluation-hour credits left (%d consumed), %d sessions open\n",
		u.ClientID, u.RemainingHours, u.AllocatedHours, u.ConsumedHours, u.ActiveSessions)
	return 0
}

// warnLowCredit tells the customer, on stderr, that the operator's
// low-credit threshold is reached.
func warnLowCredit(stderr io.Writer, command string, u *client.Usage) {
	if u.LowCreditThreshold != nil {
		fmt.Fprintf(stderr, "evalmeter %s: warning: client %s has %d evaluation-hour credits left, at or below its low-credit threshold of %d; ask your operator for more\n",
			command, u.ClientID, u.RemainingHours, *u.LowCreditThreshold)
	}
}

// numbered is path for part i of n: path itself for one part, else with -i
// before its extension (receipt.json: receipt-1.json, receipt-2.json, ...).
func numbered(path string, i, n int) string {
	if n == 1 {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + strconv.Itoa(i+1) + ext
}
