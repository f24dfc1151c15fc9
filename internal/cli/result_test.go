package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmeter/evalmeter/internal/pgtest"
)

func TestDetectCI(t *testing.T) {
	sha := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name  string
		env   map[string]string
		want  *ciInfo
		runID string
	}{
		{"none", map[string]string{"GITHUB_SHA": sha}, nil, ""},
		{"github push", map[string]string{"GITHUB_ACTIONS": "true", "GITHUB_SHA": sha, "GITHUB_REF_NAME": "main", "GITHUB_RUN_ID": "991"},
			&ciInfo{"github-actions", sha, "main", "991"}, "commit-0123456789ab"},
		{"github pull request", map[string]string{"GITHUB_ACTIONS": "true", "GITHUB_SHA": sha, "GITHUB_HEAD_REF": "fix-agent", "GITHUB_REF_NAME": "12/merge", "GITHUB_RUN_ID": "992"},
			&ciInfo{"github-actions", sha, "fix-agent", "992"}, "commit-0123456789ab"},
		{"gitlab", map[string]string{"GITLAB_CI": "true", "CI_COMMIT_SHA": sha, "CI_COMMIT_REF_NAME": "main", "CI_PIPELINE_ID": "77"},
			&ciInfo{"gitlab-ci", sha, "main", "77"}, "commit-0123456789ab"},
		{"gitlab merge request", map[string]string{"GITLAB_CI": "true", "CI_COMMIT_SHA": sha, "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "mr", "CI_COMMIT_REF_NAME": "x", "CI_PIPELINE_ID": "78"},
			&ciInfo{"gitlab-ci", sha, "mr", "78"}, "commit-0123456789ab"},
		{"buildkite", map[string]string{"BUILDKITE": "true", "BUILDKITE_COMMIT": "abcdef1", "BUILDKITE_BRANCH": "dev", "BUILDKITE_BUILD_ID": "0190-aa"},
			&ciInfo{"buildkite", "abcdef1", "dev", "0190-aa"}, "commit-abcdef1"},
		{"buildkite HEAD", map[string]string{"BUILDKITE": "true", "BUILDKITE_COMMIT": "HEAD"},
			&ciInfo{System: "buildkite", Commit: "HEAD"}, ""},
		{"jenkins", map[string]string{"JENKINS_URL": "https://ci.example/", "GIT_COMMIT": sha, "GIT_BRANCH": "origin/main", "BUILD_TAG": "jenkins-evals-5", "BUILD_NUMBER": "5"},
			&ciInfo{"jenkins", sha, "origin/main", "jenkins-evals-5"}, "commit-0123456789ab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := detectCI(func(k string) string { return tc.env[k] })
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("detectCI = %+v, want %+v", got, tc.want)
			}
			if id := got.runID(); id != tc.runID {
				t.Errorf("run id %q, want %q", id, tc.runID)
			}
		})
	}
}

// clearCI unsets the CI variables of the machine running the test.
func clearCI(t *testing.T) {
	for _, s := range ciSystems {
		for _, names := range [][]string{{s.marker}, s.commit, s.branch, s.pipeline} {
			for _, n := range names {
				t.Setenv(n, "")
				os.Unsetenv(n)
			}
		}
	}
}

// TestSubmitDryRun: nothing is posted, no URL or key is needed, and the
// gates are checked on the metrics computed here.
func TestSubmitDryRun(t *testing.T) {
	clearCI(t)
	t.Setenv(EnvAPIKey, "")
	t.Setenv(EnvURL, "")
	r := writeRequest(t, "dry", "pass", "fail")
	status, stdout, stderr := evalmeter(t, "submit", "--dry-run", "--gate", "status.pass_rate>=0.5", r)
	if status != 0 || !strings.Contains(stdout, "run dry: 2 cases") || !strings.Contains(stdout, "(computed here)") ||
		!strings.Contains(stderr, "dry run: computed here, nothing posted, no credit spent") || !strings.Contains(stderr, "gate status.pass_rate>=0.5: pass") {
		t.Errorf("dry run: %d\n%s\n%s", status, stdout, stderr)
	}
	status, _, stderr = evalmeter(t, "submit", "--dry-run", "--gate", "status.pass_rate>=0.9", r)
	if status != 3 || !strings.Contains(stderr, "gate status.pass_rate>=0.9: FAIL") {
		t.Errorf("failing gate on a dry run: %d\n%s", status, stderr)
	}

	// The requests alone, which compare reads as the run, with the digests computed here.
	saved := filepath.Join(t.TempDir(), "r.json")
	status, _, stderr = evalmeter(t, "submit", "--dry-run", "--save-result", saved, r)
	b, _ := os.ReadFile(saved)
	if status != 0 || !strings.Contains(stderr, "a dry run: no answer of the service") || !strings.Contains(string(b), `"dry_run": true`) || strings.Contains(string(b), `"response"`) {
		t.Fatalf("--dry-run --save-result: %d\n%s\n%s", status, stderr, b)
	}
	status, rep, stderr := compareJSON(t, saved, r)
	if status != 0 || rep == nil || rep.Baseline.Format != "dry-run result" || rep.Baseline.ServiceResult != "" || rep.Baseline.Digests[0] != rep.Candidate.Digests[0] {
		t.Errorf("compare of a dry run's result: %d %+v\n%s", status, rep, stderr)
	}
	status, _, stderr = evalmeter(t, "compare", "--result-baseline", saved, r, r)
	if status != 2 || !strings.Contains(stderr, "is the result of a dry run: it holds no answer of the service") {
		t.Errorf("--result-baseline of a dry run: %d\n%s", status, stderr)
	}
}

// TestSubmitResultPathFirst: a result file that cannot be written fails the
// submission before a session is opened.
func TestSubmitResultPathFirst(t *testing.T) {
	clearCI(t)
	a := startAPI(t, pgtest.NewDatabase(t), strings.Repeat("s", 32))
	a.grant(t, 10)
	dir := t.TempDir()
	status, _, stderr := evalmeter(t, "submit", "--url", a.url, "--cache-file", filepath.Join(dir, "cache"),
		"--save-result", filepath.Join(dir, "missing", "result.json"), writeRequest(t, "r", "pass"))
	if status != 2 || !strings.Contains(stderr, "--save-result: open "+filepath.Join(dir, "missing")) {
		t.Errorf("status %d\n%s", status, stderr)
	}
	if n := a.consumed(t); n != 0 {
		t.Errorf("%d credits spent", n)
	}
}

// TestSubmitInCI: in a CI job, the result file records the job and the
// default run id names the commit; the request holds neither.
func TestSubmitInCI(t *testing.T) {
	clearCI(t)
	a := startAPI(t, pgtest.NewDatabase(t), strings.Repeat("s", 32))
	a.grant(t, 10)
	sha := "89abcdef0123456789abcdef0123456789abcdef"
	for k, v := range map[string]string{"GITLAB_CI": "true", "CI_COMMIT_SHA": sha, "CI_COMMIT_REF_NAME": "feature/x", "CI_PIPELINE_ID": "4242"} {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	result := filepath.Join(dir, "result.json")
	status, stdout, stderr := evalmeter(t, "submit", "--url", a.url, "--cache-file", filepath.Join(dir, "cache"),
		"--from", "junit", "--save-result", result, "../../convert/testdata/junit/pytest.xml")
	if status != 0 || !strings.Contains(stderr, "CI gitlab-ci, commit "+sha+", branch feature/x, pipeline 4242") {
		t.Fatalf("submit: %d\n%s\n%s", status, stdout, stderr)
	}
	b, _ := os.ReadFile(result)
	var saved savedResult
	if err := json.Unmarshal(b, &saved); err != nil {
		t.Fatal(err)
	}
	if saved.RunID != "commit-89abcdef0123" || saved.CI == nil || *saved.CI != (ciInfo{"gitlab-ci", sha, "feature/x", "4242"}) {
		t.Errorf("result file: run id %q, ci %+v", saved.RunID, saved.CI)
	}
	req := string(saved.Parts[0].Request)
	if !strings.Contains(req, `"commit-89abcdef0123"`) || strings.Contains(req, "4242") || strings.Contains(req, "feature") {
		t.Errorf("the request holds more than the run id of the CI job: %s", req)
	}
	// The run compares with itself, tied to the service's digest.
	status, rep, stderr := compareJSON(t, result, result)
	if status != 0 || rep == nil || rep.Baseline.ServiceResult != result {
		t.Errorf("compare: %d %+v\n%s", status, rep, stderr)
	}
}
