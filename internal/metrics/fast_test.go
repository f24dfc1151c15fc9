package metrics_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gowebpki/jcs"

	"github.com/evalmeter/evalmeter/internal/benchbody"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// TestFastPathAgrees checks that the fast path and the careful parser give
// the same answer, metrics or error, on every body of the corpus, on the
// benchmarks' bodies, and on each valid body written again with white
// space as encoders write it. The fast path must also take the bodies it
// is for: a fast path that always gave up would agree, and be useless.
func TestFastPathAgrees(t *testing.T) {
	bodies := corpus(t)
	for _, size := range benchbody.Sizes {
		bodies["bench/"+size.Name] = size.Body()
	}
	// Every enum value, each of which the fast path must read.
	bodies["bench/enums"] = []byte(`{"run_id":"r","cases":[` +
		`{"case_id":"a","status":"pass","latency_ms":1,"boundary_violations":["scope_escape","unauthorized_tool","data_boundary","policy_boundary","instruction_override"]},` +
		`{"case_id":"b","status":"fail","latency_ms":1},{"case_id":"c","status":"error","latency_ms":1},{"case_id":"d","status":"timeout","latency_ms":1}]}`)
	// Member names too near the end of the body for the matchers to read
	// the longest name at once.
	for name, body := range map[string]string{
		"run_id":        `{"cases":[{"case_id":"a","status":"pass","latency_ms":1}],"run_id":"r"}`,
		"cost_currency": `{"run_id":"r","cases":[{"case_id":"a","status":"pass","latency_ms":1,"cost":1}],"cost_currency":"EUR"}`,
		"cost":          `{"run_id":"r","cost_currency":"EUR","cases":[{"case_id":"a","status":"pass","latency_ms":1,"cost":1}]}`,
		"status":        `{"run_id":"r","cases":[{"case_id":"a","latency_ms":1,"status":"pass"}]}`,
	} {
		bodies["bench/near-end/"+name] = []byte(body)
	}
	// Broken literals where a tool check's passed is read, compact and not:
	// the fast path must not take a prefix of true or false for it.
	for _, lit := range []string{"tru", "truE", "trux", "fals", "falsE", "falsy", "t", "f", "nul"} {
		for form, check := range map[string]string{"compact": `{"name":"t","passed":%s}`, "spaced": `{"passed": %s, "name":"t"}`} {
			bodies["literal/"+form+"/"+lit] = []byte(`{"run_id":"r","cases":[{"case_id":"a","status":"pass","latency_ms":1,"tool_checks":[` +
				strings.Replace(check, "%s", lit, 1) + `]}]}`)
		}
	}
	respaced := map[string][]byte{}
	for name, body := range bodies {
		// Every body in RFC 8785 form, valid or not, for canonicalCase.
		if canonical, err := jcs.Transform(body); err == nil && !bytes.Equal(canonical, body) {
			respaced[name+"/jcs"] = canonical
		}
		if _, err := metrics.ComputeCarefully(body); err != nil {
			continue
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, body, "", "  "); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		respaced[name+"/indented"] = indented.Bytes()
		respaced[name+"/python"] = pythonSpacing(body)
		canonical, err := metrics.Canonical(body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		respaced[name+"/canonical"] = canonical
	}
	valid := 0
	for name := range respaced {
		if strings.HasSuffix(name, "/canonical") {
			valid++
		}
	}
	maps.Copy(bodies, respaced)
	fast := 0
	for name, body := range bodies {
		want, wantErr := metrics.ComputeCarefully(body)
		got, gotErr := metrics.Compute(body)
		if diff := cmp.Diff(wantErr, gotErr); diff != "" {
			t.Fatalf("%s: errors differ (-careful +fast):\n%s", name, diff)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: metrics differ (-careful +fast):\n%s", name, diff)
		}
		if metrics.TakesFastPath(body) {
			fast++
			if wantErr != nil {
				t.Fatalf("%s: the fast path reads a body the careful parser refuses: %v", name, wantErr)
			}
		}
		if strings.HasPrefix(name, "bench/") && !metrics.TakesFastPath(body) {
			t.Errorf("%s: the fast path gives up on it", name)
		}
		// A case in canonical form is taken as it is: canonicalCase must
		// read every case of a canonical body that the fast path reads,
		// but for numbers in exponent form, which it leaves to fastCase.
		if strings.HasSuffix(name, "/canonical") && metrics.TakesFastPath(body) {
			want := got.CaseCount - casesWithExponents(t, body)
			if n := metrics.CasesTakenAsWritten(body); n != want {
				t.Errorf("%s: %d of its cases are taken as written; want %d", name, n, want)
			}
		}
	}
	// Bodies with escapes, non-ASCII, exponents outside the fast forms or
	// errors go the careful way; the rest of the valid ones must not.
	t.Logf("the fast path reads %d of %d bodies, %d of them valid", fast, len(bodies), 4*valid)
	if fast < 3*valid {
		t.Errorf("the fast path reads %d bodies; want at least %d of the %d valid ones and their respaced and canonical forms", fast, 3*valid, 4*valid)
	}
}

var exponent = regexp.MustCompile(`":-?[0-9.]+[eE]`) // a value of a compact body

// casesWithExponents returns how many cases of a valid body have a number
// in exponent form.
func casesWithExponents(t *testing.T, body []byte) int {
	var req struct{ Cases []json.RawMessage }
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range req.Cases {
		if exponent.Match(c) {
			n++
		}
	}
	return n
}

// pythonSpacing re-encodes a valid body as Python's json.dumps does by
// default: a space after each ',' and ':'.
func pythonSpacing(body []byte) []byte {
	var out bytes.Buffer
	inString, escaped := false, false
	for _, c := range body {
		out.WriteByte(c)
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':'):
			out.WriteByte(' ')
		}
	}
	return out.Bytes()
}

// FuzzFastPath checks, for any body, that the fast path and the careful
// parser give the same metrics or the same error.
func FuzzFastPath(f *testing.F) {
	for _, v := range loadVectors(f) {
		if len(v.Body) <= 8<<10 {
			f.Add([]byte(v.Body))
		}
	}
	for _, s := range edgeCases() {
		f.Add([]byte(s))
	}
	f.Add(benchbody.Sizes[0].Body())
	for _, s := range edgeCases() {
		if canonical, err := metrics.Canonical([]byte(s)); err == nil {
			f.Add(canonical) // for canonicalCase
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantErr := metrics.ComputeCarefully(body)
		got, gotErr := metrics.Compute(body)
		if diff := cmp.Diff(wantErr, gotErr); diff != "" {
			t.Fatalf("errors differ (-careful +fast):\n%s", diff)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("metrics differ (-careful +fast):\n%s", diff)
		}
	})
}
