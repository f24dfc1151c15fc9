package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/evalmeter/evalmeter/convert"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// fixtures are the converters' own test files.
const fixtures = "../../convert/testdata"

func TestConvertCmd(t *testing.T) {
	salt := filepath.Join(t.TempDir(), "salt")
	os.WriteFile(salt, []byte("0123456789abcdef0123456789abcdef\n"), 0o600)
	tests := []struct {
		name   string
		args   []string
		status int
		stderr string // in stderr
	}{
		{"promptfoo", []string{"--from", "promptfoo", fixtures + "/promptfoo/v3.json"}, 0, "cases from promptfoo"},
		{"auto", []string{fixtures + "/inspect/epochs.json"}, 0, "cases from inspect"},
		{"several files", []string{"--from", "promptfoo", fixtures + "/promptfoo/v3.json", fixtures + "/promptfoo/v3_second.json"}, 0, "duplicate case ids got a suffix"},
		{"warnings counted", []string{"--from", "promptfoo", fixtures + "/promptfoo/manychecks.json"}, 0, "tool checks dropped"},
		{"run id", []string{"--run-id", "nightly-42", fixtures + "/promptfoo/v2.json"}, 0, "run id nightly-42"},
		{"hashed ids", []string{"--hash-ids", "--id-salt-file", salt, fixtures + "/promptfoo/v2.json"}, 0, ""},
		{"wrong format", []string{"--from", "tau2", fixtures + "/promptfoo/v3.json"}, 2, "it looks like promptfoo results (use --from promptfoo)"},
		{"unknown format", []string{"--from", "csv", fixtures + "/promptfoo/v3.json"}, 2, "unknown format"},
		{"undetectable", []string{fixtures + "/swebench/run_evaluation/eval-2025-03/org__agent-v1/psf__requests-863/test_output.txt"}, 2, "name the format with --from"},
		{"missing file", []string{"--from", "junit", "no-such.xml"}, 2, "no-such.xml"},
		{"truncated", []string{"--from", "deepeval", fixtures + "/deepeval/truncated.json"}, 2, "truncated"},
		{"unscored", []string{"--from", "inspect", fixtures + "/inspect/unscored.json"}, 1, "inspect score"},
		{"link only", []string{"--from", "deepeval", fixtures + "/deepeval/link_only.json"}, 1, "Confident AI"},
		{"hash without key", []string{"--hash-ids", fixtures + "/promptfoo/v2.json"}, 2, "EVALMETER_ID_SALT"},
		{"key without hash", []string{"--id-salt-file", salt, fixtures + "/promptfoo/v2.json"}, 2, "add --hash-ids"},
		{"bad run id", []string{"--run-id", "nightly 42", fixtures + "/promptfoo/v2.json"}, 2, "run id"},
		{"bad currency", []string{"--currency", "JPY", fixtures + "/promptfoo/v2.json"}, 2, "EUR, USD or GBP"},
		{"no file", nil, 2, "name the results files"},
	}
	hashed := regexp.MustCompile(`^[0-9a-f]{32}(:[0-9]+)?$`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvIDSalt, "")
			status, stdout, stderr := evalmeter(t, append([]string{"convert"}, tt.args...)...)
			if status != tt.status || !strings.Contains(stderr, tt.stderr) {
				t.Fatalf("exit %d, want %d; stderr want %q:\n%s", status, tt.status, tt.stderr, stderr)
			}
			if status != 0 {
				if stdout != "" {
					t.Errorf("stdout on failure: %s", stdout)
				}
				return
			}
			// What convert prints, the service accepts, and it is the
			// canonical form whose SHA-256 the service returns
			// (docs/customer.md#receipts): one line, and its newline.
			body := []byte(strings.TrimSuffix(stdout, "\n"))
			canonical, err := metrics.Canonical(body)
			if err != nil {
				t.Fatalf("the engine refuses the output: %v\n%s", err, stdout)
			}
			if !bytes.Equal(canonical, body) || strings.Count(stdout, "\n") != 1 {
				t.Fatalf("the output is not one line of canonical JSON:\n%s\nwant\n%s", stdout, canonical)
			}
			m, err := metrics.Compute(body)
			if sum := sha256.Sum256(body); err != nil || hex.EncodeToString(sum[:]) != m.Integrity.CanonicalSHA256 {
				t.Fatalf("sha256sum of the output is not its canonical_sha256: %v", err)
			}
			if tt.name == "hashed ids" {
				var req struct {
					Cases []struct {
						CaseID string `json:"case_id"`
					}
				}
				json.Unmarshal([]byte(stdout), &req)
				for _, c := range req.Cases {
					if !hashed.MatchString(c.CaseID) {
						t.Errorf("case id %q is not a keyed hash", c.CaseID)
					}
				}
			}
		})
	}
}

// TestConvertCmdPrivate converts every fixture, in the format it is of and
// auto-detected, and checks that the free text planted in them appears
// neither in the request nor in any message.
func TestConvertCmdPrivate(t *testing.T) {
	formats := convert.Formats()
	n := 0
	filepath.WalkDir(fixtures, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		for _, from := range append([]string{"auto"}, formats...) {
			_, stdout, stderr := evalmeter(t, "convert", "--from", from, path)
			if strings.Contains(strings.ToUpper(stdout+stderr), "SECRETMARKER") {
				t.Errorf("convert --from %s %s leaks free text:\n%s\n%s", from, path, stdout, stderr)
			}
			n++
		}
		return nil
	})
	if n < 100 {
		t.Fatalf("only %d conversions: fixtures missing?", n)
	}
}

// TestConvertCmdTooMany: more than 500 cases is exit 1 with what to do.
func TestConvertCmdTooMany(t *testing.T) {
	path := writePromptfoo(t, 501)
	status, stdout, stderr := evalmeter(t, "convert", path)
	if status != 1 || stdout != "" || !strings.Contains(stderr, "501 cases, more than the 500") || !strings.Contains(stderr, "--split") {
		t.Errorf("501 cases: exit %d\n%s\n%s", status, stdout, stderr)
	}
}

// writePromptfoo writes a promptfoo version 3 output file of n results.
func writePromptfoo(t *testing.T, n int) string {
	t.Helper()
	var results []string
	for i := range n {
		results = append(results, fmt.Sprintf(`{"testIdx":%d,"promptIdx":0,"success":%v,"latencyMs":%d,"prompt":{"raw":"q"},"response":{"output":"a"}}`, i, i%3 != 0, 10+i))
	}
	body := `{"evalId":"eval-big-1","results":{"version":3,"timestamp":"2026-11-22T10:00:00Z","prompts":[],"results":[` +
		strings.Join(results, ",") + `],"stats":{"successes":0,"failures":0}},"config":{}}`
	path := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
