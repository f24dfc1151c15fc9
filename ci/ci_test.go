package ci_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/internal/proctest"
)

const version = "v0.0.0-citest"

var root, _ = filepath.Abs("..")

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestCI builds the release once, as make dist does, for the tests of the action and
// the template.
func TestCI(t *testing.T) {
	rel := makeRelease(t)
	t.Run("GitHubAction", func(t *testing.T) { testGitHubAction(t, rel) })
	t.Run("TamperedRelease", func(t *testing.T) { testTamperedRelease(t, rel) })
	t.Run("GitLabTemplate", func(t *testing.T) { testGitLabTemplate(t, rel) })
}

// release is the output of make dist for this machine's platform, served over HTTP.
type release struct {
	dir, url, bin string
}

// makeRelease runs make dist for this machine's platform, or takes the release that
// make unit built before go test (EVALMETER_TEST_RELEASE), whose CI script must be
// this tree's.
func makeRelease(t *testing.T) *release {
	t.Helper()
	dir := os.Getenv("EVALMETER_TEST_RELEASE")
	if dir == "" {
		dir = t.TempDir()
		cmd := exec.Command("make", "-s", "dist", "DIST_DIR="+dir, "PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH, "VERSION="+version)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make dist: %v\n%s", err, out)
		}
	}
	script, err := os.ReadFile(filepath.Join(root, "ci", "evalmeter-ci.sh"))
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(filepath.Join(dir, "evalmeter-ci.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shipped, script) {
		t.Fatalf("%s is not a release of this tree (its evalmeter-ci.sh is not ci/evalmeter-ci.sh): run make dist", dir)
	}
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`evalmeter-\S+-` + runtime.GOOS + `-` + runtime.GOARCH + `\n`).Find(sums)
	if name == nil {
		t.Fatalf("%s/SHA256SUMS lists no binary for %s/%s:\n%s", dir, runtime.GOOS, runtime.GOARCH, sums)
	}
	return &release{dir: dir, url: serve(t, dir), bin: filepath.Join(dir, strings.TrimSpace(string(name)))}
}

// serve serves dir over loopback HTTP until the test ends and returns its URL.
func serve(t *testing.T, dir string) string {
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv.URL
}

// service starts evalmeter api, built from the tree, on a new database and grants
// client acme credits; it returns the API's URL and the client's key. The release
// holds the customer's binary (make dist: -tags customer), which has no api role.
func service(t *testing.T) (url, key string) {
	t.Helper()
	bin := proctest.Build(t, "..")
	db := pgtest.NewDatabase(t)
	addr, ops := proctest.FreeAddr(t), proctest.FreeAddr(t)
	proctest.Start(t, bin, []string{"DATABASE_URL=" + db, "EVALMETER_TOKEN_SECRET=" + strings.Repeat("t", 32)},
		"api", "--addr", addr, "--ops-addr", ops, "--migrate")
	proctest.WaitOK(t, "http://"+ops+"/readyz")
	out, err := exec.Command(bin, "clients", "grant", "--database-url", db, "--client-id", "acme", "--hours", "10").Output()
	if err != nil {
		t.Fatalf("clients grant: %v", err)
	}
	return "http://" + addr, strings.TrimSpace(string(out))
}

// junit writes a JUnit file of n test cases, those in failing failing.
func junit(t *testing.T, dir, name string, n int, failing func(i int) bool) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`<testsuite name="agent">`)
	for i := range n {
		fmt.Fprintf(&b, `<testcase classname="agent" name="task_%02d" time="1.5">`, i)
		if failing(i) {
			b.WriteString(`<failure message="wrong answer"/>`)
		}
		b.WriteString(`</testcase>`)
	}
	b.WriteString(`</testsuite>`)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The runs compared: 80 tasks, 10 failing in the baseline; the regression fails 5 more.
func baselineFails(i int) bool   { return i >= 70 }
func regressionFails(i int) bool { return i >= 70 || i < 5 }

// baseEnv is the environment of a CI job on this machine: PATH and a home of its own
// (the session cache lives there: every job starts with none, as on a new runner).
func baseEnv(t *testing.T) map[string]string {
	return map[string]string{"PATH": os.Getenv("PATH"), "HOME": t.TempDir(), "TMPDIR": t.TempDir(), "LANG": "C.UTF-8"}
}

func environ(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// runShell runs a script and returns its exit status and what it printed.
func runShell(t *testing.T, dir string, env map[string]string, name string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = environ(env)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	case err != nil:
		t.Fatalf("%s: %v", name, err)
	}
	return 0, out.String()
}

// githubJob is a job of GitHub Actions: its workspace and the files the runner gives
// each step.
type githubJob struct {
	workspace, summary, output, path string
	env                              map[string]string
}

func newGitHubJob(t *testing.T, event, sha, branch string) *githubJob {
	t.Helper()
	dir := t.TempDir()
	j := &githubJob{workspace: filepath.Join(dir, "work"), summary: filepath.Join(dir, "summary.md"),
		output: filepath.Join(dir, "output"), path: filepath.Join(dir, "path"), env: baseEnv(t)}
	for _, p := range []string{j.summary, j.output, j.path} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(j.workspace, 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": event, "GITHUB_SHA": sha,
		"GITHUB_REF_NAME": branch, "GITHUB_RUN_ID": "7001", "GITHUB_WORKSPACE": j.workspace,
		"GITHUB_STEP_SUMMARY": j.summary, "GITHUB_OUTPUT": j.output, "GITHUB_PATH": j.path,
		// A backslash, as in the paths of Windows runners (D:\a\_temp).
		"RUNNER_TEMP": filepath.Join(dir, `runner\temp`), "RUNNER_OS": "Linux",
	} {
		j.env[k] = v
	}
	if event == "pull_request" {
		j.env["GITHUB_HEAD_REF"] = branch
		j.env["GITHUB_REF_NAME"] = "12/merge"
	}
	os.Mkdir(j.env["RUNNER_TEMP"], 0o700)
	return j
}

// actionFile is the part of action.yml that a runner reads.
type actionFile struct {
	Inputs map[string]struct {
		Required bool    `json:"required"`
		Default  *string `json:"default"`
	} `json:"inputs"`
	Outputs map[string]struct {
		Value string `json:"value"`
	} `json:"outputs"`
	Runs struct {
		Using string `json:"using"`
		Steps []struct {
			ID    string            `json:"id"`
			Shell string            `json:"shell"`
			Run   string            `json:"run"`
			Env   map[string]string `json:"env"`
		} `json:"steps"`
	} `json:"runs"`
}

var expression = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// runAction runs action.yml's steps as GitHub's runner runs a composite action's bash
// steps, and returns the exit status, the log and the action's outputs.
func (j *githubJob) runAction(t *testing.T, inputs map[string]string) (int, string, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a actionFile
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if a.Runs.Using != "composite" {
		t.Fatalf("runs.using %q: the action must be composite (no runtime of ours)", a.Runs.Using)
	}
	for name := range inputs {
		if _, ok := a.Inputs[name]; !ok {
			t.Fatalf("action.yml has no input %q", name)
		}
	}
	steps := map[string]map[string]string{}
	eval := func(s string) string {
		return expression.ReplaceAllStringFunc(s, func(m string) string {
			e := expression.FindStringSubmatch(m)[1]
			switch {
			case strings.HasPrefix(e, "inputs."):
				name := strings.TrimPrefix(e, "inputs.")
				in, ok := a.Inputs[name]
				if !ok {
					t.Fatalf("action.yml uses an undeclared input: %s", m)
				}
				if v, ok := inputs[name]; ok {
					return v
				}
				if in.Required {
					t.Fatalf("input %s is required", name)
				}
				if in.Default != nil {
					return *in.Default
				}
				return ""
			case strings.HasPrefix(e, "steps."):
				parts := strings.Split(e, ".") // steps.ID.outputs.NAME
				if len(parts) != 4 || parts[2] != "outputs" {
					t.Fatalf("unsupported expression %s", m)
				}
				return steps[parts[1]][parts[3]]
			}
			t.Fatalf("action.yml uses an expression this test does not evaluate: %s", m)
			return ""
		})
	}
	status, log := 0, ""
	for _, step := range a.Runs.Steps {
		if step.Shell != "bash" {
			t.Fatalf("step %s: shell %q; the action's steps run in bash", step.ID, step.Shell)
		}
		env := map[string]string{"GITHUB_ACTION_PATH": root}
		for k, v := range j.env {
			env[k] = v
		}
		for k, v := range step.Env {
			env[k] = eval(v)
		}
		os.WriteFile(j.output, nil, 0o600)
		script := filepath.Join(t.TempDir(), "step.sh")
		if err := os.WriteFile(script, []byte(eval(step.Run)), 0o600); err != nil {
			t.Fatal(err)
		}
		// As GitHub's runner runs shell: bash.
		status, log = runShell(t, j.workspace, env, "bash", "--noprofile", "--norc", "-eo", "pipefail", script)
		out, _ := os.ReadFile(j.output)
		steps[step.ID] = map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				steps[step.ID][k] = v
			}
		}
		if status != 0 {
			break
		}
	}
	outputs := map[string]string{}
	for name, o := range a.Outputs {
		outputs[name] = eval(o.Value)
	}
	return status, log, outputs
}

func (j *githubJob) summaryText(t *testing.T) string {
	b, err := os.ReadFile(j.summary)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGitHubAction: the default branch submits and keeps its result; a pull request
// submits its own and compares, with the Markdown in the job summary.
func testGitHubAction(t *testing.T, rel *release) {
	url, key := service(t)
	inputs := func(results, baseline string) map[string]string {
		return map[string]string{"download-url": rel.url, "url": url, "api-key": key, "from": "junit",
			"results": results, "baseline": baseline, "gates": "status.pass_rate>=0.5\nlatency_ms.p95<=5000"}
	}

	// A setting that is wrong fails the step before anything is installed or posted.
	bad := newGitHubJob(t, "push", "0000000000000000000000000000000000000000", "main")
	in := inputs(junit(t, bad.workspace, "results.xml", 3, baselineFails), "")
	in["max-drop"] = "two"
	if status, log, _ := bad.runAction(t, in); status != 2 || !strings.Contains(log, `max-drop (EVALMETER_CI_MAX_DROP) is "two": give points between 0 and 100, e.g. 2`) || strings.Contains(log, "installed") {
		t.Errorf("max-drop two: status %d\n%s", status, log)
	}

	// The default branch: no baseline yet. A warning, and the result kept. The release
	// is pinned by the SHA-256 of its SHA256SUMS.
	main := newGitHubJob(t, "push", "1111111111111111111111111111111111111111", "main")
	results := junit(t, main.workspace, "results.xml", 80, baselineFails)
	in = inputs(results, "baseline/evalmeter-result.json")
	in["release-sha256"] = fileSHA256(t, filepath.Join(rel.dir, "SHA256SUMS"))
	status, log, out := main.runAction(t, in)
	if status != 0 || !strings.Contains(log, "::warning title=evalmeter::no baseline at baseline/evalmeter-result.json (the default branch's first result, or a wrong path?)") ||
		!strings.Contains(log, "gate status.pass_rate>=0.5: pass") || out["result-file"] != "evalmeter-result.json" || out["verdict"] != "" {
		t.Fatalf("main: status %d, outputs %v\n%s", status, out, log)
	}
	if strings.Contains(log, key) {
		t.Errorf("the log holds the API key:\n%s", log)
	}
	baseline := filepath.Join(main.workspace, "evalmeter-result.json")
	if b, err := os.ReadFile(baseline); err != nil || !strings.Contains(string(b), `"run_id": "commit-111111111111"`) {
		t.Fatalf("the result file: %v\n%s", err, b)
	}
	if p, _ := os.ReadFile(main.path); !strings.HasSuffix(strings.TrimSpace(string(p)), "evalmeter-bin") {
		t.Errorf("GITHUB_PATH: %q", p)
	}
	if s := main.summaryText(t); s != "" {
		t.Errorf("a push wrote the summary:\n%s", s)
	}

	for _, tc := range []struct {
		name    string
		failing func(int) bool
		status  int
		verdict string
		want    []string
	}{
		{"regression", regressionFails, 3, "regression", []string{
			"### evalmeter compare: regression\n", "| cases | 80 | 80 |", "| pass rate (95% CI) | 87.5% ",
			"**Pass → fail (5):** `agent.task_00`, `agent.task_01`, `agent.task_02`, `agent.task_03`, `agent.task_04`\n",
			"(the service's)",
		}},
		{"no change", baselineFails, 0, "no_change", []string{"### evalmeter compare: no change\n", "(the service's)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := newGitHubJob(t, "pull_request", "2222222222222222222222222222222222222222", "agent-change")
			results := junit(t, pr.workspace, "results.xml", 80, tc.failing)
			status, log, out := pr.runAction(t, inputs(results, baseline))
			if status != tc.status || out["verdict"] != tc.verdict {
				t.Fatalf("status %d, outputs %v; want %d %s\n%s", status, out, tc.status, tc.verdict, log)
			}
			summary := pr.summaryText(t)
			for _, w := range tc.want {
				if !strings.Contains(summary, w) {
					t.Errorf("the job summary lacks %q:\n%s", w, summary)
				}
			}
			md, err := os.ReadFile(filepath.Join(pr.workspace, out["markdown-file"]))
			if err != nil || string(md) != summary {
				t.Errorf("markdown-file %s (%v) is not the summary", out["markdown-file"], err)
			}
			if _, err := os.Stat(filepath.Join(pr.workspace, out["json-file"])); err != nil {
				t.Error(err)
			}
		})
	}

	// A dry run compares what it converted, and posts nothing.
	t.Run("dry run", func(t *testing.T) {
		pr := newGitHubJob(t, "pull_request", "3333333333333333333333333333333333333333", "agent-change")
		results := junit(t, pr.workspace, "results.xml", 80, regressionFails)
		in := inputs(results, baseline)
		in["submit"], in["url"], in["api-key"] = "dry-run", "", ""
		status, log, out := pr.runAction(t, in)
		if status != 3 || out["verdict"] != "regression" || out["result-file"] != "evalmeter-result.json" || !strings.Contains(log, "nothing posted, no credit spent") {
			t.Fatalf("status %d, outputs %v\n%s", status, out, log)
		}
		// The baseline's digest is the service's; the candidate's was computed here.
		s := pr.summaryText(t)
		if !strings.Contains(s, "### evalmeter compare: regression") || !regexp.MustCompile("\n\\| SHA-256 \\| `[0-9a-f]{64}` \\(the service's\\) \\| `[0-9a-f]{64}` \\|\n").MatchString(s) {
			t.Errorf("summary:\n%s", s)
		}
	})
}

func fileSHA256(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// testTamperedRelease: a binary that is not the one SHA256SUMS lists is neither
// installed nor run, and neither is a release that is not the one pinned.
func testTamperedRelease(t *testing.T, rel *release) {
	t.Run("pinned", func(t *testing.T) {
		job := newGitHubJob(t, "push", "5555555555555555555555555555555555555555", "main")
		results := junit(t, job.workspace, "results.xml", 3, baselineFails)
		status, log, _ := job.runAction(t, map[string]string{"download-url": rel.url, "results": results, "submit": "dry-run",
			"release-sha256": strings.Repeat("ab", 32)})
		if status != 2 || !strings.Contains(log, "not the release you pinned") || strings.Contains(log, "dry run") {
			t.Fatalf("status %d\n%s", status, log)
		}
	})

	dir := t.TempDir()
	src := rel.dir
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Join(src, e.Name()) == rel.bin {
			b = append(b, 0) // still runs; not the release
		}
		os.WriteFile(filepath.Join(dir, e.Name()), b, 0o755)
	}
	job := newGitHubJob(t, "push", "4444444444444444444444444444444444444444", "main")
	results := junit(t, job.workspace, "results.xml", 3, baselineFails)
	status, log, _ := job.runAction(t, map[string]string{"download-url": serve(t, dir), "results": results, "submit": "dry-run"})
	if status != 2 || !strings.Contains(log, "but SHA256SUMS says") || !strings.Contains(log, "not running it") {
		t.Fatalf("status %d\n%s", status, log)
	}
	if _, err := os.Stat(filepath.Join(job.env["RUNNER_TEMP"], "evalmeter-bin", "evalmeter")); err == nil {
		t.Error("the tampered binary was installed")
	}
	if strings.Contains(log, "dry run") {
		t.Errorf("the tampered binary ran:\n%s", log)
	}
}

// gitlabTemplate is ci/gitlab/evalmeter.yml with its inputs interpolated as GitLab
// does: in the values of the document after the spec header.
func gitlabTemplate(t *testing.T, inputs map[string]string) (env map[string]string, script string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "ci", "gitlab", "evalmeter.yml"))
	if err != nil {
		t.Fatal(err)
	}
	header, body, ok := strings.Cut(string(b), "\n---\n")
	if !ok {
		t.Fatal("the template has no spec header")
	}
	var spec struct {
		Spec struct {
			Inputs map[string]struct {
				Default *string  `json:"default"`
				Options []string `json:"options"`
			} `json:"inputs"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(header), &spec); err != nil {
		t.Fatal(err)
	}
	values := map[string]string{}
	for name, in := range spec.Spec.Inputs {
		v, given := inputs[name]
		switch {
		case given:
		case in.Default != nil:
			v = *in.Default
		default:
			t.Fatalf("input %s is required", name)
		}
		if len(in.Options) > 0 && !slices.Contains(in.Options, v) {
			t.Fatalf("input %s: %q is not one of %v", name, v, in.Options)
		}
		values[name] = v
	}
	for name := range inputs {
		if _, ok := values[name]; !ok {
			t.Fatalf("the template has no input %q", name)
		}
	}
	interpolation := regexp.MustCompile(`\$\[\[\s*inputs\.([a-z0-9_-]+)\s*\]\]`)
	var doc map[string]struct {
		Variables map[string]string `json:"variables"`
		Script    []string          `json:"script"`
	}
	if err := yaml.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	job, ok := doc["evalmeter"]
	if !ok {
		t.Fatal("the template has no job evalmeter")
	}
	interpolate := func(s string) string {
		s = interpolation.ReplaceAllStringFunc(s, func(m string) string {
			name := interpolation.FindStringSubmatch(m)[1]
			v, ok := values[name]
			if !ok {
				t.Fatalf("the template uses an undeclared input: %s", m)
			}
			return v
		})
		if strings.Contains(s, "$[[") {
			t.Fatalf("an interpolation this test does not read: %s", s)
		}
		return s
	}
	env = map[string]string{}
	for k, v := range job.Variables {
		env[k] = interpolate(v)
	}
	for i := range job.Script {
		job.Script[i] = interpolate(job.Script[i])
	}
	return env, strings.Join(job.Script, "\n")
}

// gitlab is a project on GitLab: its artifacts API, which serves the last artifacts of
// job evalmeter on a branch to a request with the job token.
type gitlab struct {
	mu        sync.Mutex
	artifacts map[string]string // branch -> the workspace of its last evalmeter job
	requests  []string
	url       string
	// free: the artifacts API refuses job tokens, as GitLab's Free tier does.
	free bool
}

const (
	jobToken     = "glcbt-64-secret-job-token"
	projectToken = "glpat-secret-project-token"
)

func newGitLab(t *testing.T) *gitlab {
	g := &gitlab{artifacts: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.requests = append(g.requests, r.URL.RequestURI())
		if !(r.Header.Get("PRIVATE-TOKEN") == projectToken || !g.free && r.Header.Get("JOB-TOKEN") == jobToken) {
			http.Error(w, `{"message":"401 Unauthorized"}`, http.StatusUnauthorized)
			return
		}
		// GET /api/v4/projects/:id/jobs/artifacts/:ref_name/raw/*artifact_path?job=name
		rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/v4/projects/42/jobs/artifacts/")
		ref, path, ok2 := strings.Cut(rest, "/raw/")
		if !ok || !ok2 || r.URL.Query().Get("job") != "evalmeter" {
			http.NotFound(w, r)
			return
		}
		ref = strings.ReplaceAll(ref, "%2F", "/")
		dir, ok := g.artifacts[ref]
		if !ok {
			http.Error(w, `{"message":"404 Not found"}`, http.StatusNotFound)
			return
		}
		http.ServeFile(w, r, filepath.Join(dir, filepath.FromSlash(path)))
	}))
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

// gitlabJob runs the template's job of a pipeline on branch in a small image's shell:
// busybox sh with busybox's applets only (wget, no curl), as in alpine.
func (g *gitlab) runJob(t *testing.T, branch, sha string, failing func(int) bool, inputs, variables map[string]string) (int, string, string) {
	t.Helper()
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal("busybox is needed to run the GitLab template as in a small image: apt-get install busybox")
	}
	bin := t.TempDir()
	if out, err := exec.Command(busybox, "--install", "-s", bin).CombinedOutput(); err != nil {
		t.Fatalf("busybox --install: %v\n%s", err, out)
	}
	workspace := t.TempDir()
	vars, script := gitlabTemplate(t, inputs)
	env := baseEnv(t)
	env["PATH"] = bin
	for k, v := range map[string]string{
		"CI": "true", "GITLAB_CI": "true", "CI_COMMIT_SHA": sha, "CI_COMMIT_REF_NAME": branch,
		"CI_DEFAULT_BRANCH": "main", "CI_PIPELINE_ID": "501", "CI_JOB_NAME": "evalmeter",
		"CI_PROJECT_DIR": workspace, "CI_PROJECT_ID": "42", "CI_API_V4_URL": g.url + "/api/v4",
		"CI_JOB_TOKEN": jobToken,
	} {
		env[k] = v
	}
	for k, v := range variables { // the project's CI/CD variables
		env[k] = v
	}
	for k, v := range vars { // the runner expands variables in variables
		env[k] = os.Expand(v, func(name string) string { return env[name] })
	}
	if len(inputs["results"]) > 0 {
		for _, f := range strings.Split(inputs["results"], "\n") {
			junit(t, workspace, f, 80, failing)
		}
	}
	status, log := runShell(t, workspace, env, filepath.Join(bin, "sh"), "-c", "set -eo pipefail\n"+script)
	if status == 0 {
		g.mu.Lock()
		g.artifacts[branch] = workspace
		g.mu.Unlock()
	}
	return status, log, workspace
}

// testGitLabTemplate: a merge request's pipeline compares its result with the default
// branch's last one, fetched with the job token, or on GitLab Free with a project token.
func testGitLabTemplate(t *testing.T, rel *release) {
	url, key := service(t)
	g := newGitLab(t)
	inputs := map[string]string{"download-url": rel.url, "url": url, "results": "results.xml", "from": "junit"}
	variables := map[string]string{"EVALMETER_API_KEY": key}

	// A merge request before the default branch has a result: nothing to compare.
	status, log, _ := g.runJob(t, "first-change", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", baselineFails, inputs, variables)
	if status != 0 || !strings.Contains(log, "warning: no evalmeter-result.json of job evalmeter in the last successful pipeline of main") {
		t.Fatalf("before main: status %d\n%s", status, log)
	}

	status, log, _ = g.runJob(t, "main", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", baselineFails, inputs, variables)
	if status != 0 || !strings.Contains(log, "this result is the next baseline; nothing compared") || !strings.Contains(log, "evalmeter-ci.sh: OK") {
		t.Fatalf("main: status %d\n%s", status, log)
	}

	// The change breaks 5 tasks, and is on a branch with a slash.
	status, log, ws := g.runJob(t, "feature/agent-v2", "cccccccccccccccccccccccccccccccccccccccc", regressionFails, inputs, variables)
	if status != 3 || !strings.Contains(log, "baseline: the last evalmeter-result.json of job evalmeter on main") || !strings.Contains(log, "verdict: regression") {
		t.Fatalf("merge request: status %d\n%s", status, log)
	}
	md, err := os.ReadFile(filepath.Join(ws, "evalmeter-compare.md"))
	if err != nil || !strings.Contains(string(md), "### evalmeter compare: regression") || !strings.Contains(string(md), "**Pass → fail (5):**") {
		t.Errorf("evalmeter-compare.md: %v\n%s", err, md)
	}
	if strings.Contains(log, key) || strings.Contains(log, jobToken) {
		t.Errorf("the log holds a secret:\n%s", log)
	}

	// GitLab Free: the job token cannot read artifacts. Say what to do; then do it.
	g.mu.Lock()
	g.free = true
	g.mu.Unlock()
	status, log, _ = g.runJob(t, "feature/agent-v3", "dddddddddddddddddddddddddddddddddddddddd", regressionFails, inputs, variables)
	if status != 2 || !strings.Contains(log, "GitLab refused to read main's artifacts (401): CI_JOB_TOKEN reads them on GitLab Premium and Ultimate only; elsewhere set EVALMETER_CI_GITLAB_TOKEN") {
		t.Fatalf("free tier: status %d\n%s", status, log)
	}
	variables["EVALMETER_CI_GITLAB_TOKEN"] = projectToken
	status, log, _ = g.runJob(t, "feature/agent-v3", "dddddddddddddddddddddddddddddddddddddddd", regressionFails, inputs, variables)
	if status != 3 || !strings.Contains(log, "verdict: regression") || strings.Contains(log, projectToken) {
		t.Fatalf("free tier with a project token: status %d\n%s", status, log)
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if want := "/api/v4/projects/42/jobs/artifacts/main/raw/evalmeter-result.json?job=evalmeter"; !slices.Contains(g.requests, want) {
		t.Errorf("artifact requests %v, want %s", g.requests, want)
	}
}
