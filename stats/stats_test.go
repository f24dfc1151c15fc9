package stats

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// tolerance is how close every figure must be to the independent vectors.
const tolerance = 1e-9

func near(a, b float64) bool { return math.Abs(a-b) <= tolerance }

// vectorCase is a case as hack/stats/vectors.py writes it.
type vectorCase struct {
	ID           string   `json:"id"`
	Group        string   `json:"group"`
	Status       string   `json:"status"`
	LatencyMS    float64  `json:"latency_ms"`
	InputTokens  *int64   `json:"input_tokens"`
	OutputTokens *int64   `json:"output_tokens"`
	Cost         *float64 `json:"cost"`
}

func (v vectorCase) toCase() Case {
	return Case{ID: v.ID, Group: v.Group, Pass: v.Status == "pass", LatencyMS: v.LatencyMS, Cost: v.Cost,
		Tokens: Tokens(v.InputTokens, v.OutputTokens)}
}

type vector struct {
	Name      string       `json:"name"`
	MaxDrop   float64      `json:"max_drop"`
	Baseline  []vectorCase `json:"baseline"`
	Candidate []vectorCase `json:"candidate"`
	Expect    struct {
		Comparison
		Verdict Verdict `json:"verdict"`
	} `json:"expect"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("testdata/compare-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []vector `json:"vectors"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 20 {
		t.Fatalf("%d vectors; the file should hold every scenario of hack/stats/vectors.py", len(file.Vectors))
	}
	return file.Vectors
}

// TestVectors compares every figure with the values of an independent
// implementation (hack/stats/vectors.py, exact rational arithmetic).
func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			var base, cand []Case
			for _, c := range v.Baseline {
				base = append(base, c.toCase())
			}
			for _, c := range v.Candidate {
				cand = append(cand, c.toCase())
			}
			got, err := Compare(base, cand)
			if err != nil {
				t.Fatal(err)
			}
			checkRun(t, "baseline", got.Baseline, v.Expect.Baseline)
			checkRun(t, "candidate", got.Candidate, v.Expect.Candidate)
			checkDifference(t, "paired", got.Paired.Difference, v.Expect.Paired.Difference)
			checkOptional(t, "paired.detectable_drop", got.Paired.DetectableDrop, v.Expect.Paired.DetectableDrop)
			if got.Paired.Flips != v.Expect.Paired.Flips || got.Paired.McNemarGroups != v.Expect.Paired.McNemarGroups {
				t.Errorf("flips %+v over %d groups, want %+v over %d", got.Paired.Flips, got.Paired.McNemarGroups, v.Expect.Paired.Flips, v.Expect.Paired.McNemarGroups)
			}
			if !near(got.Paired.McNemarP, v.Expect.Paired.McNemarP) {
				t.Errorf("mcnemar_p %.17g, want %.17g", got.Paired.McNemarP, v.Expect.Paired.McNemarP)
			}
			checkDifference(t, "latency_ms", got.LatencyMS, v.Expect.LatencyMS)
			checkDifference(t, "tokens", got.Tokens, v.Expect.Tokens)
			checkDifference(t, "cost", got.Cost, v.Expect.Cost)
			if got.Unmatched != v.Expect.Unmatched {
				t.Errorf("unmatched %+v, want %+v", got.Unmatched, v.Expect.Unmatched)
			}
			if verdict := got.Paired.Verdict(v.MaxDrop); verdict != v.Expect.Verdict {
				t.Errorf("verdict %s, want %s", verdict, v.Expect.Verdict)
			}
		})
	}
}

func checkRun(t *testing.T, name string, got, want RunSummary) {
	t.Helper()
	if got.Cases != want.Cases || got.Passed != want.Passed || got.Groups != want.Groups {
		t.Errorf("%s: %d cases, %d passed, %d groups; want %d, %d, %d", name, got.Cases, got.Passed, got.Groups, want.Cases, want.Passed, want.Groups)
	}
	if !near(got.PassRate, want.PassRate) || !near(got.Wilson95.Lo(), want.Wilson95.Lo()) || !near(got.Wilson95.Hi(), want.Wilson95.Hi()) {
		t.Errorf("%s: pass rate %.17g %v, want %.17g %v", name, got.PassRate, got.Wilson95, want.PassRate, want.Wilson95)
	}
	if len(got.PassAtK) != len(want.PassAtK) {
		t.Fatalf("%s: pass@k for %d values of k, want %d", name, len(got.PassAtK), len(want.PassAtK))
	}
	for i, w := range want.PassAtK {
		g := got.PassAtK[i]
		if g.K != w.K || !near(g.PassAtK, w.PassAtK) || !near(g.PassHatK, w.PassHatK) {
			t.Errorf("%s: %+v, want %+v", name, g, w)
		}
	}
}

func checkDifference(t *testing.T, name string, got, want Difference) {
	t.Helper()
	if got.Groups != want.Groups {
		t.Errorf("%s: %d groups, want %d", name, got.Groups, want.Groups)
	}
	checkOptional(t, name+".diff", got.Diff, want.Diff)
	checkOptional(t, name+".se", got.SE, want.SE)
	if (got.CI95 == nil) != (want.CI95 == nil) {
		t.Errorf("%s.ci_95: %v, want %v", name, got.CI95, want.CI95)
	} else if got.CI95 != nil && (!near(got.CI95.Lo(), want.CI95.Lo()) || !near(got.CI95.Hi(), want.CI95.Hi())) {
		t.Errorf("%s.ci_95: %v, want %v", name, *got.CI95, *want.CI95)
	}
}

func checkOptional(t *testing.T, name string, got, want *float64) {
	t.Helper()
	switch {
	case (got == nil) != (want == nil):
		t.Errorf("%s: %v, want %v", name, got, want)
	case got != nil && !near(*got, *want):
		t.Errorf("%s: %.17g, want %.17g", name, *got, *want)
	}
}

// Values that can be checked by hand or against a table.
func TestFormulas(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"McNemar b=5 c=0", McNemarExact(5, 0), 0.0625},
		{"McNemar b=1 c=0", McNemarExact(1, 0), 1},
		{"McNemar b=0 c=0", McNemarExact(0, 0), 1},
		{"McNemar b=3 c=3", McNemarExact(3, 3), 1},
		{"McNemar b=10 c=2", McNemarExact(10, 2), 2 * (1 + 12 + 66) / 4096.0},
		{"McNemar beyond float underflow, b=c", McNemarExact(1500, 1500), 1},
		{"Wilson 0 of 10, lo", Wilson(0, 10).Lo(), 0},
		{"Wilson 0 of 10, hi", Wilson(0, 10).Hi(), 0.2775328},
		{"Wilson 10 of 10, lo", Wilson(10, 10).Lo(), 1 - 0.2775328},
		{"Wilson 0 of 0, hi", Wilson(0, 0).Hi(), 1},
		{"pass@1 is the rate", PassAtK(5, 2, 1), 0.4},
		{"pass@2 of 2 in 5", PassAtK(5, 2, 2), 1 - 3.0/10},
		{"pass@k with no failure", PassAtK(5, 5, 3), 1},
		{"pass^2 of 2 in 5", PassHatK(5, 2, 2), 1.0 / 10},
		{"pass^3 of 2 in 5", PassHatK(5, 2, 3), 0},
	} {
		if math.Abs(tc.got-tc.want) > 1e-7 {
			t.Errorf("%s = %.10g, want %.10g", tc.name, tc.got, tc.want)
		}
	}
}

func TestPairedUndefined(t *testing.T) {
	if d := Paired(nil); d.Diff != nil || d.SE != nil || d.CI95 != nil {
		t.Errorf("no group: %+v", d)
	}
	if d := Paired([]float64{-1}); d.Diff == nil || *d.Diff != -1 || d.SE != nil || d.CI95 != nil {
		t.Errorf("one group: %+v", d)
	}
	p := PassDifference{Difference: Paired([]float64{-1})}
	if v := p.Verdict(0.02); v != Inconclusive {
		t.Errorf("one group's verdict: %s", v)
	}
}

func TestCompareRefusesDuplicateIDs(t *testing.T) {
	_, err := Compare([]Case{{ID: "a"}, {ID: "a"}}, []Case{{ID: "a"}})
	if err == nil {
		t.Error("a run with a case id twice was compared")
	}
}
