package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

const example = "../../api/examples/metrics-request.json"

func TestCompute(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		stdin     string
		status    int
		errorCode string // of the envelope on stdout, for status 1
		field     string
	}{
		{name: "file", args: []string{"compute", example}, status: 0},
		{name: "stdin", args: []string{"compute"}, stdin: mustRead(t, example), status: 0},
		{name: "dash is stdin", args: []string{"compute", "-"}, stdin: mustRead(t, example), status: 0},
		{name: "schema error", args: []string{"compute"}, stdin: `{"run_id":"r","cases":[{"case_id":"a","status":"ok","latency_ms":1}]}`, status: 1, errorCode: "invalid_field", field: "cases[0].status"},
		{name: "malformed", args: []string{"compute"}, stdin: `{"run_id":`, status: 1, errorCode: "malformed_json"},
		{name: "too large", args: []string{"compute"}, stdin: `{"run_id":"` + strings.Repeat("r", 262144) + `"}`, status: 1, errorCode: "payload_too_large"},
		{name: "missing file", args: []string{"compute", "no-such-file.json"}, status: 2},
		{name: "two files", args: []string{"compute", example, example}, status: 2},
		{name: "unknown command", args: []string{"serve"}, status: 2},
		{name: "no command", args: nil, status: 2},
		{name: "help", args: []string{"help"}, status: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := run(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if status != tt.status {
				t.Fatalf("exit status %d, want %d; stdout %s; stderr %s", status, tt.status, stdout.String(), stderr.String())
			}
			if tt.status == 1 {
				var env struct {
					Error struct{ Code, Message, Field string }
				}
				if err := json.Unmarshal(stdout.Bytes(), &env); err != nil {
					t.Fatalf("stdout is not an error envelope: %v\n%s", err, stdout.String())
				}
				if env.Error.Code != tt.errorCode || env.Error.Field != tt.field || env.Error.Message == "" {
					t.Errorf("envelope %+v, want code %q field %q", env.Error, tt.errorCode, tt.field)
				}
			}
			if tt.status == 2 && stderr.Len() == 0 {
				t.Error("nothing on stderr to say why")
			}
		})
	}
}

// TestComputeDigest: the digest printed is the SHA-256 of the RFC 8785 form
// of the request as gowebpki/jcs writes it.
func TestComputeDigest(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if status := run([]string{"compute", example}, nil, &stdout, &stderr); status != 0 {
		t.Fatalf("exit status %d: %s", status, stderr.String())
	}
	var out struct {
		CaseCount int `json:"case_count"`
		Integrity struct {
			Algorithm       string `json:"algorithm"`
			CanonicalSHA256 string `json:"canonical_sha256"`
		} `json:"integrity"`
		ReportIncluded *bool `json:"report_included"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	canonical, err := jcs.Transform([]byte(mustRead(t, example)))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canonical)
	if out.Integrity.Algorithm != "SHA-256" || out.Integrity.CanonicalSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("integrity %+v, want SHA-256 %x", out.Integrity, sum)
	}
	if out.CaseCount != 3 || out.ReportIncluded == nil || *out.ReportIncluded {
		t.Errorf("case_count %d, report_included %v", out.CaseCount, out.ReportIncluded)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSchemaCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if status := run([]string{"schema"}, nil, &stdout, &stderr); status != 0 {
		t.Fatalf("exit status %d: %s", status, stderr.String())
	}
	if want := mustRead(t, "../../api/metrics-request.schema.json"); stdout.String() != want {
		t.Error("evalmeter schema does not print api/metrics-request.schema.json")
	}
	if status := run([]string{"schema", "extra"}, nil, &stdout, &stderr); status != 2 {
		t.Errorf("extra argument: exit status %d, want 2", status)
	}
}

// TestHelp: -h and --help of every command print its usage and exit 0, and
// the top-level help names every command of this build.
func TestHelp(t *testing.T) {
	commands := [][]string{{"compute"}, {"schema"}, {"convert"}, {"submit"}, {"compare"}, {"verify"}, {"usage"}}
	names := []string{"compute", "schema", "convert", "submit", "compare", "verify", "usage", "version"}
	if len(serverCommands()) > 0 {
		commands = append(commands, []string{"api"}, []string{"controller"}, []string{"migrate"}, []string{"clients", "grant"},
			[]string{"clients", "events"}, []string{"receipt-keys"})
		names = append(names, "api", "controller", "migrate", "clients grant", "clients show", "clients events", "clients report", "receipt-keys")
	}
	for _, cmd := range commands {
		for _, flag := range []string{"-h", "--help"} {
			var stdout, stderr bytes.Buffer
			if status := run(append(append([]string{}, cmd...), flag), strings.NewReader(""), &stdout, &stderr); status != 0 || !strings.Contains(stderr.String(), "Usage: evalmeter "+cmd[0]) {
				t.Errorf("evalmeter %s %s: status %d\n%s", strings.Join(cmd, " "), flag, status, stderr.String())
			}
		}
	}
	var stdout, stderr bytes.Buffer
	run([]string{"help"}, nil, &stdout, &stderr)
	for _, name := range names {
		if !strings.Contains(stdout.String(), "evalmeter "+name) {
			t.Errorf("the top-level help does not name evalmeter %s", name)
		}
	}
	if len(serverCommands()) == 0 && strings.Contains(stdout.String(), "evalmeter api") {
		t.Errorf("the customer's build lists the server's roles:\n%s", stdout.String())
	}
}

// TestCustomerBuild: the binary customers download (make dist: -tags
// customer) carries no server, ledger, operator or Kubernetes code.
func TestCustomerBuild(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "customer", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, dep := range deps {
		for _, banned := range []string{
			"github.com/evalmeter/evalmeter/server", "github.com/evalmeter/evalmeter/controllers",
			"github.com/evalmeter/evalmeter/internal/ledger", "github.com/evalmeter/evalmeter/internal/admin",
			"k8s.io/", "sigs.k8s.io/", "github.com/jackc/pgx", "github.com/gorilla/mux", "github.com/prometheus/",
		} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("the customer's build imports %s", dep)
			}
		}
	}
	if !slices.Contains(deps, "github.com/evalmeter/evalmeter/internal/cli") {
		t.Errorf("the customer's build does not import internal/cli: %v", deps)
	}
}

// evalmeter version names the release and the commit the build was stamped
// with (make build, make dist, make image).
func TestVersion(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "v0.2.0-3-g0123456789ab", "0123456789abcdef0123456789abcdef01234567"
	var stdout, stderr bytes.Buffer
	if status := run([]string{"version"}, nil, &stdout, &stderr); status != 0 {
		t.Fatalf("exit %d: %s", status, stderr.String())
	}
	want := "evalmeter v0.2.0-3-g0123456789ab (commit 0123456789abcdef0123456789abcdef01234567, " + runtime.Version() + ")\n"
	if stdout.String() != want {
		t.Errorf("version printed %q, want %q", stdout.String(), want)
	}
}
