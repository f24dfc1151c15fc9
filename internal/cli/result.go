package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/evalmeter/evalmeter/api"
)

// resultFormat marks a result file and its version.
const resultFormat = "1"

// maxResultBytes bounds a result file: a run split into many parts of at
// most metrics.MaxBodyBytes each, and the service's answers.
const maxResultBytes = 64 << 20

// savedResult is the file of submit --save-result: the requests as posted,
// the service's answers as sent, and where they came from. It stays on the
// customer's machine: the CI fields are never sent (the request is closed).
// A dry run's file holds the requests alone (DryRun, no responses).
type savedResult struct {
	Format  string       `json:"evalmeter_result"`
	RunID   string       `json:"run_id"`
	Service string       `json:"service_url,omitempty"`
	DryRun  bool         `json:"dry_run,omitempty"`
	SavedAt time.Time    `json:"saved_at"`
	CI      *ciInfo      `json:"ci,omitempty"`
	Parts   []resultPart `json:"parts"`
}

// resultPart is one posted request and the service's response body.
type resultPart struct {
	Request  json.RawMessage `json:"request"`
	Response json.RawMessage `json:"response,omitempty"`
}

// resultFile is a result file being written: created before anything is
// posted, so that a path that cannot be written fails before a credit is
// spent, and renamed into place whole, so that a CI artifact is never a
// half-written file.
type resultFile struct {
	path string
	tmp  *os.File
}

func createResult(path string) (*resultFile, error) {
	return createFile("--save-result", path)
}

// createFile starts writing path for flag (named in errors).
func createFile(flag, path string) (*resultFile, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".evalmeter-*")
	if err != nil {
		return nil, fmt.Errorf("%s: %v", flag, err)
	}
	return &resultFile{path: path, tmp: tmp}, nil
}

// commit writes v as JSON and renames the file into place.
func (f *resultFile) commit(v any) error {
	defer f.abort()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	if _, err := f.tmp.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%s: %v", f.path, err)
	}
	if err := f.tmp.Close(); err != nil {
		return fmt.Errorf("%s: %v", f.path, err)
	}
	if err := os.Rename(f.tmp.Name(), f.path); err != nil {
		return fmt.Errorf("%s: %v", f.path, err)
	}
	return nil
}

// abort removes the temporary file, unless commit renamed it.
func (f *resultFile) abort() {
	f.tmp.Close()
	os.Remove(f.tmp.Name())
}

// writeResult writes a result file at once.
func writeResult(path string, r *savedResult) error {
	f, err := createResult(path)
	if err != nil {
		return err
	}
	return f.commit(r)
}

// errNotResult is a document without the evalmeter_result member.
var errNotResult = errors.New("not a result file of evalmeter submit --save-result")

// readResult reads a result file and checks that each part's digest, which
// the engine recomputes from the request, is the one the service answered.
// It returns the digests in order: the service's, or for a dry run's file the
// engine's.
func readResult(path string) (*savedResult, []string, error) {
	b, err := readBounded(path, maxResultBytes)
	if err != nil {
		return nil, nil, err
	}
	return parseResult(path, b)
}

// parseResult reads a result file, or returns an error wrapping errNotResult
// for a document that is not one. A file of up to maxResultBytes is decoded
// once.
func parseResult(path string, b []byte) (*savedResult, []string, error) {
	var r savedResult
	err := json.Unmarshal(b, &r)
	switch {
	case err != nil && bytes.Contains(b, []byte(`"evalmeter_result"`)):
		return nil, nil, fmt.Errorf("%s: a result file of evalmeter submit --save-result that does not decode: %v", path, err)
	case err != nil || r.Format == "":
		return nil, nil, fmt.Errorf("%s: %w", path, errNotResult)
	}
	if r.Format != resultFormat {
		return nil, nil, fmt.Errorf("%s: result file version %q; this evalmeter reads version %s", path, r.Format, resultFormat)
	}
	if len(r.Parts) == 0 {
		return nil, nil, fmt.Errorf("%s: the result file holds no part", path)
	}
	digests := make([]string, len(r.Parts))
	for i, p := range r.Parts {
		local, merr := checkRequest(p.Request)
		if merr != nil {
			return nil, nil, &mismatchError{fmt.Sprintf("%s: part %d: the saved request is not valid: %s", path, i+1, merr.Message)}
		}
		if r.DryRun {
			if len(p.Response) > 0 {
				return nil, nil, &mismatchError{fmt.Sprintf("%s: part %d: a dry run's result holds a response: the file was changed", path, i+1)}
			}
			digests[i] = local.Integrity.CanonicalSHA256
			continue
		}
		var resp struct {
			Metrics *api.Metrics `json:"metrics"`
		}
		if err := json.Unmarshal(p.Response, &resp); err != nil || resp.Metrics == nil {
			return nil, nil, fmt.Errorf("%s: part %d: the response is not a metrics response", path, i+1)
		}
		svc := resp.Metrics
		if local.Integrity.CanonicalSHA256 != svc.Integrity.CanonicalSHA256 {
			return nil, nil, &mismatchError{fmt.Sprintf("%s: part %d: the saved request's digest is %s, but the service answered for %s: the file was changed after the service answered",
				path, i+1, local.Integrity.CanonicalSHA256, svc.Integrity.CanonicalSHA256)}
		}
		if local.Status.Counts != svc.Status.Counts || local.CaseCount != svc.CaseCount {
			return nil, nil, &mismatchError{fmt.Sprintf("%s: part %d: the service's counts (%d cases, %+v) are not the engine's (%d cases, %+v) for the same request",
				path, i+1, svc.CaseCount, svc.Status.Counts, local.CaseCount, local.Status.Counts)}
		}
		digests[i] = svc.Integrity.CanonicalSHA256
	}
	return &r, digests, nil
}

// mismatchError is a result that does not agree with its request: the
// numbers cannot be tied to what the service computed.
type mismatchError struct{ msg string }

func (e *mismatchError) Error() string { return e.msg }

// readBounded reads at most limit bytes of a file, and refuses a larger one.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, limit>>20)
	}
	return b, nil
}

// ciInfo is the CI job a submission ran in, read from the CI's standard
// variables.
type ciInfo struct {
	System   string `json:"system"`
	Commit   string `json:"commit,omitempty"`
	Branch   string `json:"branch,omitempty"`
	Pipeline string `json:"pipeline_id,omitempty"`
}

// ciSystems lists, per CI, the variable that says the job runs there and
// the variables of its commit, branch and pipeline, the first set one
// winning.
var ciSystems = []struct {
	name, marker             string
	commit, branch, pipeline []string
}{
	{"github-actions", "GITHUB_ACTIONS", []string{"GITHUB_SHA"}, []string{"GITHUB_HEAD_REF", "GITHUB_REF_NAME"}, []string{"GITHUB_RUN_ID"}},
	{"gitlab-ci", "GITLAB_CI", []string{"CI_COMMIT_SHA"}, []string{"CI_MERGE_REQUEST_SOURCE_BRANCH_NAME", "CI_COMMIT_REF_NAME"}, []string{"CI_PIPELINE_ID"}},
	{"buildkite", "BUILDKITE", []string{"BUILDKITE_COMMIT"}, []string{"BUILDKITE_BRANCH"}, []string{"BUILDKITE_BUILD_ID"}},
	{"jenkins", "JENKINS_URL", []string{"GIT_COMMIT"}, []string{"BRANCH_NAME", "GIT_BRANCH"}, []string{"BUILD_TAG", "BUILD_NUMBER"}},
}

// detectCI returns the CI job of the environment, nil outside CI.
func detectCI(getenv func(string) string) *ciInfo {
	first := func(names []string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	for _, s := range ciSystems {
		if getenv(s.marker) == "" {
			continue
		}
		return &ciInfo{System: s.name, Commit: first(s.commit), Branch: first(s.branch), Pipeline: first(s.pipeline)}
	}
	return nil
}

var commitPattern = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// runID is the default run id of a submission in CI: the commit's, so that
// the service's record names what was evaluated. "" when the CI gives no
// commit id.
func (ci *ciInfo) runID() string {
	if ci == nil || !commitPattern.MatchString(ci.Commit) {
		return ""
	}
	c := ci.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	return "commit-" + c
}
