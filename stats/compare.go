package stats

import "fmt"

// Case is one case of a run, as the comparison sees it.
type Case struct {
	ID string
	// Group is the repeat group, "" when the case has none.
	Group string
	// Pass is true for the status pass; fail, error and timeout do not pass.
	Pass      bool
	LatencyMS float64
	// Tokens is input plus output tokens, nil when the case reports neither.
	Tokens *float64
	// Cost is nil when the case reports none; 0 is a reported cost.
	Cost *float64
}

// Tokens is a case's token count as the comparison takes it: input plus
// output tokens, nil when the case reports neither.
func Tokens(input, output *int64) *float64 {
	if input == nil && output == nil {
		return nil
	}
	var t int64
	if input != nil {
		t += *input
	}
	if output != nil {
		t += *output
	}
	f := float64(t)
	return &f
}

// key is the case's unit of analysis: its repeat group, else itself. The two
// kinds of key are kept apart, so that a case whose id is "t1" and has no
// group is not taken for repeat group "t1".
func (c *Case) key() string {
	if c.Group != "" {
		return "group:" + c.Group
	}
	return "case:" + c.ID
}

// RunSummary is one run on its own.
type RunSummary struct {
	Cases    int     `json:"cases"`
	Passed   int     `json:"passed"`
	PassRate float64 `json:"pass_rate"`
	// Wilson95 is the Wilson interval of the pass rate over cases.
	Wilson95 Interval `json:"wilson_95"`
	Groups   int      `json:"groups"`
	// PassAtK is empty unless some group has two or more cases; else it
	// has k = 1 up to the smallest group's size.
	PassAtK []PassAtKRow `json:"pass_at_k"`
}

// PassAtKRow is pass@k and pass^k of a run, averaged over its groups.
type PassAtKRow struct {
	K        int     `json:"k"`
	PassAtK  float64 `json:"pass_at_k"`
	PassHatK float64 `json:"pass_hat_k"`
}

// PassDifference is the paired difference of the groups' pass scores, with
// McNemar's test on the groups of one case in each run.
type PassDifference struct {
	Difference
	// DetectableDrop is DetectableFactor·SE: a smaller true drop would often
	// go unseen by this comparison.
	DetectableDrop *float64 `json:"detectable_drop"`
	McNemarGroups  int      `json:"mcnemar_groups"`
	McNemarP       float64  `json:"mcnemar_p"`
	Flips          Flips    `json:"flips"`
}

// Flips counts the single-case groups whose outcome changed.
type Flips struct {
	PassToFail int `json:"pass_to_fail"`
	FailToPass int `json:"fail_to_pass"`
}

// Unmatched counts the cases whose id the other run does not have.
type Unmatched struct {
	BaselineOnly  int `json:"baseline_only"`
	CandidateOnly int `json:"candidate_only"`
}

// Comparison is everything Compare finds.
type Comparison struct {
	Baseline  RunSummary     `json:"baseline"`
	Candidate RunSummary     `json:"candidate"`
	Paired    PassDifference `json:"paired"`
	LatencyMS Difference     `json:"latency_ms"`
	Tokens    Difference     `json:"tokens"`
	Cost      Difference     `json:"cost"`
	Unmatched Unmatched      `json:"unmatched"`
	// The case ids behind the counts, in the baseline's order (the
	// candidate's for CandidateOnly). Flipped cases are matched by id,
	// whatever their groups.
	PassToFail    []string `json:"-"`
	FailToPass    []string `json:"-"`
	BaselineOnly  []string `json:"-"`
	CandidateOnly []string `json:"-"`
}

// group is one run's cases of one group.
type group struct {
	cases, passed int
	sums          [3]float64 // latency, tokens, cost
	counts        [3]int     // cases that report each
}

func (g *group) score() float64 { return float64(g.passed) / float64(g.cases) }

// mean of measure m over the group's cases that report it.
func (g *group) mean(m int) (float64, bool) {
	if g.counts[m] == 0 {
		return 0, false
	}
	return g.sums[m] / float64(g.counts[m]), true
}

const (
	latency = iota
	tokens
	cost
)

// runGroups groups a run's cases, keeping the order in which groups first
// appear so that sums are taken in a fixed order.
func runGroups(cases []Case) (order []string, groups map[string]*group) {
	groups = make(map[string]*group)
	for i := range cases {
		c := &cases[i]
		k := c.key()
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		g.cases++
		if c.Pass {
			g.passed++
		}
		g.sums[latency] += c.LatencyMS
		g.counts[latency]++
		if c.Tokens != nil {
			g.sums[tokens] += *c.Tokens
			g.counts[tokens]++
		}
		if c.Cost != nil {
			g.sums[cost] += *c.Cost
			g.counts[cost]++
		}
	}
	return order, groups
}

func summarize(cases []Case, order []string, groups map[string]*group) RunSummary {
	s := RunSummary{Cases: len(cases), Groups: len(order), PassAtK: []PassAtKRow{}}
	for i := range cases {
		if cases[i].Pass {
			s.Passed++
		}
	}
	if s.Cases > 0 {
		s.PassRate = float64(s.Passed) / float64(s.Cases)
	}
	s.Wilson95 = Wilson(s.Passed, s.Cases)

	smallest, largest := 0, 0
	for i, k := range order {
		n := groups[k].cases
		if i == 0 || n < smallest {
			smallest = n
		}
		largest = max(largest, n)
	}
	if largest < 2 {
		return s
	}
	for k := 1; k <= smallest; k++ {
		row := PassAtKRow{K: k}
		for _, key := range order {
			g := groups[key]
			row.PassAtK += PassAtK(g.cases, g.passed, k)
			row.PassHatK += PassHatK(g.cases, g.passed, k)
		}
		row.PassAtK /= float64(len(order))
		row.PassHatK /= float64(len(order))
		s.PassAtK = append(s.PassAtK, row)
	}
	return s
}

// Compare compares a candidate run with its baseline. Cases are matched by
// id and grouped by Case.Group; each run's case ids must be unique.
//
//   - Each run: its cases, pass rate and Wilson interval, over all its cases,
//     matched or not; pass@k and pass^k when it has repeats.
//   - Paired, over the G groups present in both runs: a group's score in a
//     run is the mean pass (0 or 1) of its cases there; Paired of the
//     differences, candidate minus baseline.
//   - McNemar's exact test over the groups of exactly one case in each run.
//   - Latency, tokens and cost: Paired of the differences of the groups'
//     means, over the groups in which both runs report the measure.
func Compare(baseline, candidate []Case) (*Comparison, error) {
	if err := uniqueIDs("baseline", baseline); err != nil {
		return nil, err
	}
	if err := uniqueIDs("candidate", candidate); err != nil {
		return nil, err
	}
	bOrder, bGroups := runGroups(baseline)
	cOrder, cGroups := runGroups(candidate)
	cmp := &Comparison{
		Baseline:  summarize(baseline, bOrder, bGroups),
		Candidate: summarize(candidate, cOrder, cGroups),
	}

	var d []float64
	var measures [3][]float64
	p := &cmp.Paired
	for _, k := range bOrder {
		b, c := bGroups[k], cGroups[k]
		if c == nil {
			continue
		}
		d = append(d, c.score()-b.score())
		for m := range measures {
			bm, bok := b.mean(m)
			cm, cok := c.mean(m)
			if bok && cok {
				measures[m] = append(measures[m], cm-bm)
			}
		}
		if b.cases == 1 && c.cases == 1 {
			p.McNemarGroups++
			switch {
			case b.passed == 1 && c.passed == 0:
				p.Flips.PassToFail++
			case b.passed == 0 && c.passed == 1:
				p.Flips.FailToPass++
			}
		}
	}
	p.Difference = Paired(d)
	if p.SE != nil {
		dd := DetectableFactor * *p.SE
		p.DetectableDrop = &dd
	}
	p.McNemarP = McNemarExact(p.Flips.PassToFail, p.Flips.FailToPass)
	cmp.LatencyMS = Paired(measures[latency])
	cmp.Tokens = Paired(measures[tokens])
	cmp.Cost = Paired(measures[cost])

	candByID := make(map[string]*Case, len(candidate))
	for i := range candidate {
		candByID[candidate[i].ID] = &candidate[i]
	}
	baseIDs := make(map[string]bool, len(baseline))
	for i := range baseline {
		b := &baseline[i]
		baseIDs[b.ID] = true
		c := candByID[b.ID]
		switch {
		case c == nil:
			cmp.BaselineOnly = append(cmp.BaselineOnly, b.ID)
		case b.Pass && !c.Pass:
			cmp.PassToFail = append(cmp.PassToFail, b.ID)
		case !b.Pass && c.Pass:
			cmp.FailToPass = append(cmp.FailToPass, b.ID)
		}
	}
	for i := range candidate {
		if !baseIDs[candidate[i].ID] {
			cmp.CandidateOnly = append(cmp.CandidateOnly, candidate[i].ID)
		}
	}
	cmp.Unmatched = Unmatched{BaselineOnly: len(cmp.BaselineOnly), CandidateOnly: len(cmp.CandidateOnly)}
	return cmp, nil
}

func uniqueIDs(run string, cases []Case) error {
	seen := make(map[string]bool, len(cases))
	for i := range cases {
		if seen[cases[i].ID] {
			return fmt.Errorf("%s: case id %q appears twice; each case of a run needs its own id", run, cases[i].ID)
		}
		seen[cases[i].ID] = true
	}
	return nil
}

// Verdict is what a comparison concludes about the candidate's pass rate.
type Verdict string

const (
	// Regression: the drop is real (the interval lies below 0) and larger
	// than the tolerated drop.
	Regression Verdict = "regression"
	// Improvement: the interval lies above 0.
	Improvement Verdict = "improvement"
	// Inconclusive: the interval reaches below the tolerated drop, so a drop
	// of that size cannot be ruled out; or fewer than two groups are paired.
	Inconclusive Verdict = "inconclusive"
	// NoChange: no real drop beyond the tolerance, and none can hide in the
	// interval.
	NoChange Verdict = "no_change"
)

// Verdict checks, in this order, with maxDrop the tolerated drop of the pass
// rate as a fraction (0.02 for 2 points):
//
//  1. fewer than two paired groups: Inconclusive (no standard error);
//  2. ci_95 hi < 0 and diff < −maxDrop: Regression;
//  3. ci_95 lo > 0: Improvement;
//  4. ci_95 lo < −maxDrop: Inconclusive;
//  5. otherwise NoChange.
//
// Each comparison is strict by more than Epsilon, so that a figure that equals
// a bound in exact arithmetic (a drop of exactly 2 points, an interval of
// width 0 at 0) is on the same side of it whatever the rounding of its sums.
func (p *PassDifference) Verdict(maxDrop float64) Verdict {
	below := func(v, bound float64) bool { return v < bound-Epsilon }
	switch {
	case p.CI95 == nil:
		return Inconclusive
	case below(p.CI95.Hi(), 0) && below(*p.Diff, -maxDrop):
		return Regression
	case below(0, p.CI95.Lo()):
		return Improvement
	case below(p.CI95.Lo(), -maxDrop):
		return Inconclusive
	}
	return NoChange
}

// Epsilon is the margin of the verdict's comparisons: far below any
// difference that a count of cases can make (1/G for G groups), far above
// the rounding of a float64 sum.
const Epsilon = 1e-9
