package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/stats"
)

// statuses returns n statuses, the first fails of them "fail", the rest "pass".
func statuses(n, fails int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = "pass"
		if i < fails {
			s[i] = "fail"
		}
	}
	return s
}

// compareJSON runs compare --output json and decodes its report.
func compareJSON(t *testing.T, args ...string) (int, *compareReport, string) {
	t.Helper()
	status, stdout, stderr := evalmeter(t, append([]string{"compare", "--output", "json"}, args...)...)
	if stdout == "" {
		return status, nil, stderr
	}
	var rep compareReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("compare's JSON: %v\n%s", err, stdout)
	}
	return status, &rep, stderr
}

func TestCompareVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name                string
		baseline, candidate []string
		flags               []string
		status              int
		verdict             stats.Verdict
		stderr              string
	}{
		{"identical", statuses(200, 20), statuses(200, 20), nil, 0, stats.NoChange, ""},
		{"regression", statuses(100, 0), statuses(100, 30), nil, 3, stats.Regression, "regression: the pass rate changed by -30.0 points"},
		{"improvement", statuses(100, 30), statuses(100, 0), nil, 0, stats.Improvement, ""},
		{"inconclusive", statuses(10, 0), statuses(10, 1), nil, 0, stats.Inconclusive, "warning: inconclusive: too few cases to rule out a drop of 2 points"},
		{"inconclusive fails", statuses(10, 0), statuses(10, 1), []string{"--fail-on-inconclusive"}, 4, stats.Inconclusive, "too few cases to rule out a drop of 2 points"},
		{"one group", statuses(1, 0), statuses(1, 1), nil, 0, stats.Inconclusive, "1 group(s) in both runs; a standard error needs at least 2"},
		{"drop tolerated", statuses(100, 0), statuses(100, 30), []string{"--max-drop", "50"}, 0, stats.NoChange, ""},
		{"real drop within tolerance", statuses(400, 0), statuses(400, 20), []string{"--max-drop", "10"}, 0, stats.NoChange, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := writeRequest(t, "base", tc.baseline...)
			cand := writeRequest(t, "cand", tc.candidate...)
			status, rep, stderr := compareJSON(t, append(tc.flags, base, cand)...)
			if status != tc.status || rep == nil || rep.Verdict != tc.verdict {
				t.Fatalf("status %d, report %+v; want %d %s\n%s", status, rep, tc.status, tc.verdict, stderr)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, stderr)
			}
			if tc.stderr == "" && stderr != "" {
				t.Errorf("stderr: %s", stderr)
			}
		})
	}
}

func TestCompareErrors(t *testing.T) {
	good := writeRequest(t, "good", "pass", "fail")
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"run_id":"x","cases":[{"case_id":"a","status":"maybe","latency_ms":1}]}`), 0o600)
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{"one run", []string{good}, 2, "name two runs"},
		{"output", []string{"--output", "xml", good, good}, 2, `--output "xml"`},
		{"max drop", []string{"--max-drop", "-1", good, good}, 2, "--max-drop -1"},
		{"hash ids without from", []string{"--hash-ids", good, good}, 2, "add --from"},
		{"missing file", []string{good, filepath.Join(t.TempDir(), "none.json")}, 2, "no such file"},
		{"invalid request", []string{good, bad}, 1, "candidate: " + bad + ": not a valid metrics request: "},
		{"junit without from", []string{good, "../../convert/testdata/junit/pytest.xml"}, 1, "add --from"},
		{"result of another run", []string{"--result-baseline", good, good, good}, 2, "not a result file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, stderr := evalmeter(t, append([]string{"compare"}, tc.args...)...)
			if status != tc.status || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("status %d, want %d; stderr lacks %q:\n%s", status, tc.status, tc.stderr, stderr)
			}
		})
	}
}

// TestCompareMarkdown checks the pull-request comment: the verdict, both
// runs, the flipped ids (at most 20 each way, then a count), the digests.
func TestCompareMarkdown(t *testing.T) {
	base := writeRequest(t, "base", statuses(100, 0)...)
	cand := writeRequest(t, "cand", statuses(100, 23)...)
	status, md, stderr := evalmeter(t, "compare", "--output", "markdown", base, cand)
	if status != 3 {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	_, baseJSON, _ := evalmeter(t, "compute", base)
	var m struct {
		Integrity struct {
			Digest string `json:"canonical_sha256"`
		} `json:"integrity"`
	}
	if err := json.Unmarshal([]byte(baseJSON), &m); err != nil || len(m.Integrity.Digest) != 64 {
		t.Fatalf("compute: %v\n%s", err, baseJSON)
	}
	var ids []string
	for i := range 20 {
		ids = append(ids, fmt.Sprintf("`c%d`", i))
	}
	for _, want := range []string{
		"### evalmeter compare: regression\n",
		"| run | `base` | `cand` |",
		"| cases | 100 | 100 |",
		"| pass rate (95% CI) | 100.0% (96.3%–100.0%) | 77.0% (67.8%–84.2%) |",
		"| pass rate | -23.0 points (95% CI ",
		"| McNemar exact p | 2.38e-07 (23 pass→fail, 0 fail→pass) |",
		"**Pass → fail (23):** " + strings.Join(ids, ", ") + " and 3 more\n",
		"`" + m.Integrity.Digest + "`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "`c20`") || strings.Contains(md, "Fail → pass") {
		t.Errorf("the Markdown lists more than it should:\n%s", md)
	}
}

// TestCompareUnmatched: cases of one run only are counted in that run's
// figures and shown, not paired.
func TestCompareUnmatched(t *testing.T) {
	base := writeRequest(t, "base", "pass", "pass", "fail", "pass")
	cand := writeRequest(t, "cand", "pass", "fail")
	status, rep, stderr := compareJSON(t, base, cand)
	if status != 0 || rep == nil {
		t.Fatalf("status %d\n%s", status, stderr)
	}
	if rep.Baseline.Cases != 4 || rep.Candidate.Cases != 2 || rep.Paired.Groups != 2 ||
		rep.Unmatched != (stats.Unmatched{BaselineOnly: 2}) || strings.Join(rep.UnmatchedCases.BaselineOnly, ",") != "c2,c3" {
		t.Errorf("report: %+v", rep)
	}
	_, text, _ := evalmeter(t, "compare", base, cand)
	if !strings.Contains(text, "unmatched: 2 cases only in the baseline, 0 only in the candidate") {
		t.Errorf("the text does not show the unmatched cases:\n%s", text)
	}
}

// TestCompareFrom compares two tools' results, with and without hashed ids.
func TestCompareFrom(t *testing.T) {
	dir := t.TempDir()
	junit := func(name string, failing ...int) string {
		var b strings.Builder
		b.WriteString(`<testsuite name="s">`)
		for i := range 30 {
			fmt.Fprintf(&b, `<testcase classname="suite" name="test_%d" time="0.5">`, i)
			for _, f := range failing {
				if f == i {
					b.WriteString(`<failure message="assert"/>`)
				}
			}
			b.WriteString(`</testcase>`)
		}
		b.WriteString(`</testsuite>`)
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(b.String()), 0o600)
		return p
	}
	base, cand := junit("base.xml", 3), junit("cand.xml", 3, 7)
	status, rep, stderr := compareJSON(t, "--from", "junit", base, cand)
	if status != 0 || rep == nil || rep.Paired.Groups != 30 || strings.Join(rep.FlippedCases.PassToFail, ",") != "suite.test_7" {
		t.Fatalf("status %d, %+v\n%s", status, rep, stderr)
	}

	salt := filepath.Join(dir, "salt")
	os.WriteFile(salt, []byte(strings.Repeat("k", 32)), 0o600)
	status, rep, stderr = compareJSON(t, "--from", "junit", "--hash-ids", "--id-salt-file", salt, base, cand)
	if status != 0 || rep == nil || rep.Paired.Groups != 30 || len(rep.FlippedCases.PassToFail) != 1 || rep.FlippedCases.PassToFail[0] == "suite.test_7" {
		t.Fatalf("hashed: status %d, %+v\n%s", status, rep, stderr)
	}

	// A hashed run against a plain one shares no case: say why.
	_, hashed, _ := evalmeter(t, "convert", "--from", "junit", "--hash-ids", "--id-salt-file", salt, base)
	hashedPath := filepath.Join(dir, "hashed.json")
	os.WriteFile(hashedPath, []byte(hashed), 0o600)
	_, plain, _ := evalmeter(t, "convert", "--from", "junit", cand)
	plainPath := filepath.Join(dir, "plain.json")
	os.WriteFile(plainPath, []byte(plain), 0o600)
	status, rep, stderr = compareJSON(t, hashedPath, plainPath)
	if status != 0 || rep.Verdict != stats.Inconclusive || !strings.Contains(stderr, "the baseline's ids are keyed hashes (--hash-ids) and the candidate's are not") {
		t.Errorf("hashed against plain: %d %+v\n%s", status, rep, stderr)
	}
}

// TestCompareServiceResults submits two runs to a real evalmeter api with
// --save-result and checks that compare ties each run to the service's
// digest, and refuses a result that is not the run's.
func TestCompareServiceResults(t *testing.T) {
	a := startAPI(t, pgtest.NewDatabase(t), strings.Repeat("s", 32))
	a.grant(t, 10)
	dir := t.TempDir()
	cache := filepath.Join(dir, "sessions.json")
	base := writeRequest(t, "base", statuses(60, 5)...)
	cand := writeRequest(t, "cand", statuses(60, 9)...)
	baseResult, candResult := filepath.Join(dir, "base.result.json"), filepath.Join(dir, "cand.result.json")
	for _, x := range [][2]string{{base, baseResult}, {cand, candResult}} {
		if status, stdout, stderr := evalmeter(t, "submit", "--url", a.url, "--cache-file", cache, "--save-result", x[1], x[0]); status != 0 {
			t.Fatalf("submit %s: %d\n%s\n%s", x[0], status, stdout, stderr)
		}
	}
	var saved savedResult
	b, _ := os.ReadFile(baseResult)
	if err := json.Unmarshal(b, &saved); err != nil || saved.RunID != "base" || saved.Service != a.url || len(saved.Parts) != 1 {
		t.Fatalf("result file: %v %+v", err, saved)
	}
	var resp struct {
		Metrics struct {
			Integrity struct {
				Digest string `json:"canonical_sha256"`
			} `json:"integrity"`
		} `json:"metrics"`
	}
	json.Unmarshal(saved.Parts[0].Response, &resp)
	serviceDigest := resp.Metrics.Integrity.Digest

	// The result files themselves, and the request files checked against them.
	for _, args := range [][]string{
		{baseResult, candResult},
		{"--result-baseline", baseResult, "--result-candidate", candResult, base, cand},
	} {
		status, rep, stderr := compareJSON(t, args...)
		if status != 3 || rep == nil || rep.Verdict != stats.Regression || rep.Baseline.ServiceResult != baseResult || rep.Candidate.ServiceResult != candResult ||
			len(rep.Baseline.Digests) != 1 || rep.Baseline.Digests[0] != serviceDigest || rep.Paired.Flips.PassToFail != 4 {
			t.Errorf("compare %v: %d %+v\n%s", args, status, rep, stderr)
		}
	}
	_, text, _ := evalmeter(t, "compare", baseResult, candResult)
	if !strings.Contains(text, "digest of base: "+serviceDigest+" (the service's, from "+baseResult+")") {
		t.Errorf("the text does not print the service's digest:\n%s", text)
	}

	// A result of the other run, and a result whose request was edited.
	status, _, stderr := evalmeter(t, "compare", "--result-baseline", candResult, base, cand)
	if status != 1 || !strings.Contains(stderr, "that result is of another request") {
		t.Errorf("swapped result: %d\n%s", status, stderr)
	}
	edited := filepath.Join(dir, "edited.result.json")
	req := string(saved.Parts[0].Request)
	saved.Parts[0].Request = json.RawMessage(strings.Replace(req, `"fail"`, `"pass"`, 1))
	if string(saved.Parts[0].Request) == req {
		t.Fatalf("no failing case to edit in %s", req)
	}
	if err := writeResult(edited, &saved); err != nil {
		t.Fatal(err)
	}
	status, _, stderr = evalmeter(t, "compare", edited, candResult)
	if status != 1 || !strings.Contains(stderr, "the file was changed after the service answered") {
		t.Errorf("edited result: %d\n%s", status, stderr)
	}
}

// TestCompareDropWithinTolerance: a real drop smaller than --max-drop is no_change,
// and the message says it is real.
func TestCompareDropWithinTolerance(t *testing.T) {
	base := writeRequest(t, "base", statuses(400, 0)...)
	cand := writeRequest(t, "cand", statuses(400, 20)...)
	status, rep, stderr := compareJSON(t, "--max-drop", "10", base, cand)
	want := "no change beyond 10 points: the pass rate dropped by 5.0 points (95% CI -7.1 to -2.9), within the 10 tolerated"
	if status != 0 || rep == nil || rep.Verdict != stats.NoChange || rep.Message != want {
		t.Errorf("status %d, report %+v; want the message %q\n%s", status, rep, want, stderr)
	}
}

// TestCompareNotes: the cautions that go with a verdict.
func TestCompareNotes(t *testing.T) {
	for _, tc := range []struct {
		name                string
		baseline, candidate []string
		want                string
	}{
		{"no width", statuses(40, 4), statuses(40, 4), "every one of the 40 groups changed by the same amount (+0.0 points), so the interval has no width: changes in up to 7.5% of the groups (3/G, the rule of three) could go unseen"},
		{"few flips", statuses(80, 0), statuses(80, 5), "McNemar's exact test does not confirm this at the 5% level (p = 0.0625, 5 flips)"},
		{"none", statuses(400, 40), statuses(400, 45), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rep, stderr := compareJSON(t, writeRequest(t, "base", tc.baseline...), writeRequest(t, "cand", tc.candidate...))
			if rep == nil {
				t.Fatal(stderr)
			}
			got := strings.Join(rep.Notes, "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("notes %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCompareVectors runs stats' independent vectors through the command: as
// metrics request files, read and mapped to stats.Case by compare itself, with
// every figure of the vector in the JSON output to 1e-9. Vectors that make no
// valid request (an empty run, more than 500 cases) are left to stats' own test.
func TestCompareVectors(t *testing.T) {
	b, err := os.ReadFile("../../stats/testdata/compare-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			Name                string
			MaxDrop             float64 `json:"max_drop"`
			Baseline, Candidate []map[string]any
			Expect              map[string]any
		}
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	request := func(runID string, cases []map[string]any) string {
		req := map[string]any{"run_id": runID}
		var out []map[string]any
		for _, c := range cases {
			rc := map[string]any{"case_id": c["id"], "status": c["status"], "latency_ms": c["latency_ms"]}
			for from, to := range map[string]string{"group": "repeat_group", "input_tokens": "input_tokens", "output_tokens": "output_tokens", "cost": "cost"} {
				if v, ok := c[from]; ok {
					rc[to] = v
				}
			}
			if _, ok := c["cost"]; ok {
				req["cost_currency"] = "EUR"
			}
			out = append(out, rc)
		}
		req["cases"] = out
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), runID+".json")
		os.WriteFile(p, body, 0o600)
		return p
	}
	ran := 0
	for _, v := range file.Vectors {
		if n, m := len(v.Baseline), len(v.Candidate); n == 0 || m == 0 || n > 500 || m > 500 {
			continue
		}
		ran++
		t.Run(v.Name, func(t *testing.T) {
			maxDrop := strconv.FormatFloat(100*v.MaxDrop, 'f', -1, 64)
			_, stdout, stderr := evalmeter(t, "compare", "--output", "json", "--max-drop", maxDrop, request("base", v.Baseline), request("cand", v.Candidate))
			var got map[string]any
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			for _, d := range jsonDiffs("", v.Expect, got) {
				t.Error(d)
			}
		})
	}
	if ran < 30 {
		t.Errorf("only %d vectors make valid requests", ran)
	}
}

// jsonDiffs lists where got lacks or differs from want: numbers within 1e-9,
// objects compared on want's members only.
func jsonDiffs(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v, want an object", path, got)}
		}
		var diffs []string
		for k, wv := range w {
			diffs = append(diffs, jsonDiffs(path+"."+k, wv, g[k])...)
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %v, want %v", path, got, want)}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, jsonDiffs(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return diffs
	case float64:
		if g, ok := got.(float64); !ok || math.Abs(g-w) > 1e-9 {
			return []string{fmt.Sprintf("%s: %v, want %.17g", path, got, w)}
		}
		return nil
	}
	if want != got {
		return []string{fmt.Sprintf("%s: %v, want %v", path, got, want)}
	}
	return nil
}
