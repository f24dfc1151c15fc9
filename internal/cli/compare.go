package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/evalmeter/evalmeter/convert"
	"github.com/evalmeter/evalmeter/stats"
)

const compareUsage = `compare [--from FORMAT] [--max-drop POINTS] [--output text|json|markdown] BASELINE CANDIDATE

Compares two runs of the same cases, matched by case id, and says whether the
candidate's pass rate dropped by more than noise explains. It runs on this
machine only: nothing is sent and no credit is spent.

BASELINE and CANDIDATE are each a metrics request file, a result file of
evalmeter submit --save-result (checked against the service's digests), or,
with --from, an evaluation tool's results. The unit of analysis is the repeat
group (a case without one is its own group); see docs/compare.md.

Verdicts, checked in this order, with X = --max-drop:
  regression    the 95% interval of the difference lies below 0, and the
                difference is below -X                        exit 3
  improvement   the interval lies above 0                     exit 0
  inconclusive  the interval reaches below -X, or fewer than 2 groups are in
                both runs                         exit 0 (4 with --fail-on-inconclusive)
  no_change     otherwise                                     exit 0

Exit status: as above; 1 when a run is not a valid request or its result file
does not match it; 2 when a file or the command line is wrong.`

// compareCmd is evalmeter compare (docs/compare.md).
func compareCmd(args []string, stdout, stderr io.Writer) int {
	fs := NewFlagSet("compare", compareUsage, stderr)
	var rf requestFlags
	rf.register(fs, "")
	maxDrop := fs.Float64("max-drop", 2, "the pass-rate drop to tolerate, in points (2 is 0.02)")
	failInconclusive := fs.Bool("fail-on-inconclusive", false, "exit 4 when the verdict is inconclusive")
	output := fs.String("output", "text", "text, json, or markdown (a pull-request comment)")
	resultBaseline := fs.String("result-baseline", "", "result file of submit --save-result for BASELINE: check that the service computed it")
	resultCandidate := fs.String("result-candidate", "", "result file of submit --save-result for CANDIDATE")
	if status, ok := ParseFlags(fs, args); !ok {
		return status
	}
	if fs.NArg() != 2 {
		return Failf(stderr, "compare: name two runs, e.g. evalmeter compare baseline.json candidate.json")
	}
	if *output != "text" && *output != "json" && *output != "markdown" {
		return Failf(stderr, "compare: --output %q: use text, json or markdown", *output)
	}
	if math.IsNaN(*maxDrop) || *maxDrop < 0 || *maxDrop > 100 {
		return Failf(stderr, "compare: --max-drop %g: give points between 0 and 100, e.g. 2 for a drop of 0.02", *maxDrop)
	}
	if rf.from == "" && (rf.runID != "" || rf.hashIDs) {
		return Failf(stderr, "compare: --run-id and --hash-ids apply to results files: add --from")
	}

	base, err := loadRun("baseline", fs.Arg(0), *resultBaseline, &rf, stderr)
	if err != nil {
		return runFailure(stderr, err)
	}
	cand, err := loadRun("candidate", fs.Arg(1), *resultCandidate, &rf, stderr)
	if err != nil {
		return runFailure(stderr, err)
	}
	if base.currency != "" && cand.currency != "" && base.currency != cand.currency {
		return Failf(stderr, "compare: the baseline reports costs in %s and the candidate in %s; convert both with the same --currency", base.currency, cand.currency)
	}
	cmp, err := stats.Compare(base.cases, cand.cases)
	if err != nil {
		return Failf(stderr, "compare: %v", err)
	}
	rep := newCompareReport(base, cand, cmp, *maxDrop/100)
	if cmp.Paired.Groups == 0 {
		fmt.Fprintf(stderr, "evalmeter compare: warning: %s\n", noOverlapHint(base, cand))
	}

	switch *output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return Failf(stderr, "compare: %v", err)
		}
	case "markdown":
		rep.writeMarkdown(stdout)
	default:
		rep.writeText(stdout)
	}

	switch rep.Verdict {
	case stats.Regression:
		fmt.Fprintf(stderr, "evalmeter compare: %s\n", rep.Message)
		return 3
	case stats.Inconclusive:
		if *failInconclusive {
			fmt.Fprintf(stderr, "evalmeter compare: %s\n", rep.Message)
			return 4
		}
		fmt.Fprintf(stderr, "evalmeter compare: warning: %s\n", rep.Message)
	}
	return 0
}

// compareRun is one side of a comparison.
type compareRun struct {
	path, format, runID, currency string
	cases                         []stats.Case
	// digests are the engine's canonical SHA-256 of each request as posted
	// (one per part of a split run).
	digests []string
	// verifiedBy is the result file whose service digests equal digests;
	// "" when none was given, or the result is a dry run's.
	verifiedBy string
	// isResult: the run was read from a result file.
	isResult bool
}

// runError carries the exit status of a run that cannot be compared.
type runError struct {
	status int
	err    error
}

func (e *runError) Error() string { return e.err.Error() }

func runFailure(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "evalmeter compare: %v\n", err)
	var re *runError
	if errors.As(err, &re) {
		return re.status
	}
	var mm *mismatchError
	if errors.As(err, &mm) {
		return 1
	}
	return 2
}

// loadRun reads one run: a tool's results (with --from), a result file or a
// metrics request file, and checks it against resultPath when given.
func loadRun(label, path, resultPath string, rf *requestFlags, stderr io.Writer) (*compareRun, error) {
	var saved *savedResult
	var savedDigests []string
	if resultPath != "" {
		var err error
		if saved, savedDigests, err = readResult(resultPath); err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		if saved.DryRun {
			return nil, &runError{2, fmt.Errorf("%s: %s is the result of a dry run: it holds no answer of the service to check against; give it as the run itself", label, resultPath)}
		}
	}

	var run *compareRun
	var err error
	if rf.from != "" {
		run, err = convertRun(path, saved, rf, stderr)
	} else {
		run, err = readRun(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	if saved != nil {
		if run.isResult {
			return nil, &runError{2, fmt.Errorf("%s: %s is itself a result file: leave out --result-%s", label, path, label)}
		}
		if !slices.Equal(run.digests, savedDigests) {
			return nil, &mismatchError{fmt.Sprintf("%s: the digest of %s is %s, but the service answered %s for the request in %s: that result is of another request (convert with the same --run-id, --hash-ids and files as the submission)",
				label, path, strings.Join(run.digests, ","), strings.Join(savedDigests, ","), resultPath)}
		}
		run.verifiedBy = resultPath
	}
	return run, nil
}

// convertRun converts a tool's results as submit would, any number of
// cases, into the parts submit would post.
func convertRun(path string, saved *savedResult, rf *requestFlags, stderr io.Writer) (*compareRun, error) {
	opts, err := rf.options()
	if err != nil {
		return nil, &runError{2, err}
	}
	opts.Split = true
	if opts.RunID == "" && saved != nil {
		opts.RunID = saved.RunID // the label only; it is part of the digest
	}
	res, status := convertFiles("compare", []string{path}, opts, stderr)
	if status != 0 {
		return nil, &runError{status, fmt.Errorf("%s: cannot be compared", path)}
	}
	parts, err := res.Request.Parts()
	if err != nil {
		return nil, &runError{1, err}
	}
	run := &compareRun{path: path, format: res.Format, runID: res.Request.RunID, currency: res.Request.CostCurrency}
	for i := range parts {
		body, err := parts[i].Marshal()
		if err != nil {
			return nil, err
		}
		m, merr := checkRequest(body)
		if merr != nil {
			return nil, &runError{1, fmt.Errorf("%s: the converted request would be refused: %s", path, merr.Message)}
		}
		run.digests = append(run.digests, m.Integrity.CanonicalSHA256)
	}
	run.addCases(res.Request.Cases)
	return run, nil
}

// readRun reads a metrics request file or a result file.
func readRun(path string) (*compareRun, error) {
	b, err := readBounded(path, maxResultBytes)
	if err != nil {
		return nil, &runError{2, err}
	}
	if saved, digests, err := parseResult(path, b); !errors.Is(err, errNotResult) {
		if err != nil {
			return nil, err
		}
		run := &compareRun{path: path, format: "result", runID: saved.RunID, digests: digests, verifiedBy: path, isResult: true}
		if saved.DryRun {
			run.format, run.verifiedBy = "dry-run result", ""
		}
		for i, p := range saved.Parts {
			var req convert.Request
			if err := json.Unmarshal(p.Request, &req); err != nil {
				return nil, &runError{1, fmt.Errorf("%s: part %d: %v", path, i+1, err)}
			}
			if run.currency == "" {
				run.currency = req.CostCurrency
			}
			run.addCases(req.Cases)
		}
		return run, nil
	}
	m, merr := checkRequest(b)
	if merr != nil {
		msg := merr.Message
		if merr.Field != "" {
			msg += " (" + merr.Field + ")"
		}
		return nil, &runError{1, fmt.Errorf("%s: not a valid metrics request: %s; for an evaluation tool's results, add --from", path, msg)}
	}
	var req convert.Request
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, &runError{1, fmt.Errorf("%s: %v", path, err)}
	}
	run := &compareRun{path: path, format: "request", runID: req.RunID, currency: req.CostCurrency, digests: []string{m.Integrity.CanonicalSHA256}}
	run.addCases(req.Cases)
	return run, nil
}

func (r *compareRun) addCases(cases []convert.Case) {
	for _, c := range cases {
		r.cases = append(r.cases, stats.Case{ID: c.ID, Group: c.RepeatGroup, Pass: c.Status == convert.Pass,
			LatencyMS: c.LatencyMS, Tokens: stats.Tokens(c.InputTokens, c.OutputTokens), Cost: c.Cost})
	}
}

var hashedID = regexp.MustCompile(`^[0-9a-f]{32}(:[0-9]+)?$`)

// noOverlapHint explains two runs that share no case: almost always two
// id schemes.
func noOverlapHint(base, cand *compareRun) string {
	hashed := func(cases []stats.Case) bool {
		for _, c := range cases {
			if !hashedID.MatchString(c.ID) {
				return false
			}
		}
		return len(cases) > 0
	}
	switch bh, ch := hashed(base.cases), hashed(cand.cases); {
	case bh && !ch:
		return "the runs share no case: the baseline's ids are keyed hashes (--hash-ids) and the candidate's are not; convert both the same way"
	case ch && !bh:
		return "the runs share no case: the candidate's ids are keyed hashes (--hash-ids) and the baseline's are not; convert both the same way"
	case bh && ch:
		return "the runs share no case: with --hash-ids, both runs need the same salt (--id-salt-file or " + EnvIDSalt + ")"
	}
	return "the runs share no case id: are they runs of the same cases, converted the same way?"
}

// compareReport is the output of compare; its JSON is documented in
// docs/compare.md.
type compareReport struct {
	Baseline  runReport            `json:"baseline"`
	Candidate runReport            `json:"candidate"`
	Paired    stats.PassDifference `json:"paired"`
	LatencyMS stats.Difference     `json:"latency_ms"`
	Tokens    stats.Difference     `json:"tokens"`
	Cost      stats.Difference     `json:"cost"`
	Unmatched stats.Unmatched      `json:"unmatched"`
	// The case ids behind the flips and the unmatched counts.
	FlippedCases   flippedCases   `json:"flipped_cases"`
	UnmatchedCases unmatchedCases `json:"unmatched_cases"`
	// CostCurrency is the currency of the cost difference.
	CostCurrency string        `json:"cost_currency,omitempty"`
	MaxDrop      float64       `json:"max_drop"`
	Verdict      stats.Verdict `json:"verdict"`
	Message      string        `json:"message"`
	// Notes are cautions about the verdict (see compareReport.notes).
	Notes []string `json:"notes"`
}

type runReport struct {
	RunID  string `json:"run_id"`
	File   string `json:"file"`
	Format string `json:"format"`
	stats.RunSummary
	// Digests are the canonical SHA-256 of the run's request(s).
	Digests []string `json:"digests"`
	// ServiceResult is the result file whose service digests are Digests.
	ServiceResult string `json:"service_result,omitempty"`
}

type flippedCases struct {
	PassToFail []string `json:"pass_to_fail"`
	FailToPass []string `json:"fail_to_pass"`
}

type unmatchedCases struct {
	BaselineOnly  []string `json:"baseline_only"`
	CandidateOnly []string `json:"candidate_only"`
}

func newCompareReport(base, cand *compareRun, cmp *stats.Comparison, maxDrop float64) *compareReport {
	rr := func(r *compareRun, s stats.RunSummary) runReport {
		return runReport{RunID: r.runID, File: r.path, Format: r.format, RunSummary: s, Digests: r.digests, ServiceResult: r.verifiedBy}
	}
	rep := &compareReport{
		Baseline:  rr(base, cmp.Baseline),
		Candidate: rr(cand, cmp.Candidate),
		Paired:    cmp.Paired,
		LatencyMS: cmp.LatencyMS,
		Tokens:    cmp.Tokens,
		Cost:      cmp.Cost,
		Unmatched: cmp.Unmatched,
		MaxDrop:   maxDrop,
		Verdict:   cmp.Paired.Verdict(maxDrop),
	}
	rep.FlippedCases = flippedCases{nonNil(cmp.PassToFail), nonNil(cmp.FailToPass)}
	rep.UnmatchedCases = unmatchedCases{nonNil(cmp.BaselineOnly), nonNil(cmp.CandidateOnly)}
	rep.CostCurrency = base.currency
	if rep.CostCurrency == "" {
		rep.CostCurrency = cand.currency
	}
	rep.Message = verdictMessage(rep)
	rep.Notes = rep.notes()
	return rep
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// pts formats a difference of rates in points, signed.
func pts(v float64) string { return fmt.Sprintf("%+.1f", 100*v) }

func ptsInterval(iv *stats.Interval) string {
	if iv == nil {
		return "undefined"
	}
	return pts(iv.Lo()) + " to " + pts(iv.Hi())
}

func pct(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

// points formats a tolerance given in points, as the user wrote it.
func points(v float64) string { return strconv.FormatFloat(100*v, 'g', 4, 64) }

// pts1 formats a positive figure in points to one decimal.
func pts1(v float64) string { return fmt.Sprintf("%.1f", 100*v) }

func verdictMessage(r *compareReport) string {
	p := &r.Paired
	x := points(r.MaxDrop)
	switch r.Verdict {
	case stats.Regression:
		return fmt.Sprintf("regression: the pass rate changed by %s points (95%% CI %s), a drop of more than the %s tolerated", pts(*p.Diff), ptsInterval(p.CI95), x)
	case stats.Improvement:
		return fmt.Sprintf("improvement: the pass rate changed by %s points (95%% CI %s)", pts(*p.Diff), ptsInterval(p.CI95))
	case stats.Inconclusive:
		if p.CI95 == nil {
			return fmt.Sprintf("inconclusive: %d group(s) in both runs; a standard error needs at least 2, so too few cases to rule out a drop of %s points", p.Groups, x)
		}
		return fmt.Sprintf("inconclusive: too few cases to rule out a drop of %s points (95%% CI %s; this comparison detects drops of %s points or more)", x, ptsInterval(p.CI95), pts1(*p.DetectableDrop))
	}
	if p.CI95.Hi() < 0 { // a real drop, but within the tolerance: say so
		return fmt.Sprintf("no change beyond %s points: the pass rate dropped by %s points (95%% CI %s), within the %s tolerated", x, pts1(-*p.Diff), ptsInterval(p.CI95), x)
	}
	return fmt.Sprintf("no change beyond %s points (95%% CI %s)", x, ptsInterval(p.CI95))
}

// measureLine describes a paired difference of a measure, or why there is none.
func measureLine(d stats.Difference, unit string, prec int) string {
	if d.Diff == nil {
		return "not reported in both runs"
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	s := fmt.Sprintf("%s%s", signed(f(*d.Diff)), unit)
	if d.CI95 != nil {
		s += fmt.Sprintf(" (95%% CI %s to %s)", signed(f(d.CI95.Lo())), signed(f(d.CI95.Hi())))
	}
	return s + fmt.Sprintf(" over %d groups", d.Groups)
}

func signed(s string) string {
	if strings.HasPrefix(s, "-") {
		return s
	}
	return "+" + s
}

// costUnit is " EUR", say, after a cost difference.
func (r *compareReport) costUnit() string {
	if r.CostCurrency == "" {
		return ""
	}
	return " " + r.CostCurrency
}

func (r *compareReport) writeText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, x := range []struct {
		name string
		r    *runReport
	}{{"baseline", &r.Baseline}, {"candidate", &r.Candidate}} {
		fmt.Fprintf(tw, "%s\t%s\t%d cases\tpass %s (95%% CI %s to %s)\n", x.name, x.r.RunID, x.r.Cases, pct(x.r.PassRate), pct(x.r.Wilson95.Lo()), pct(x.r.Wilson95.Hi()))
	}
	tw.Flush()
	p := &r.Paired
	fmt.Fprintf(w, "\npaired over %d groups in both runs\n", p.Groups)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if p.Diff != nil {
		se := "undefined (fewer than 2 groups)"
		if p.SE != nil {
			se = pts1(*p.SE) + " points"
		}
		fmt.Fprintf(tw, "  pass rate\t%s points (95%% CI %s), se %s\n", pts(*p.Diff), ptsInterval(p.CI95), se)
	}
	if p.DetectableDrop != nil {
		fmt.Fprintf(tw, "  detectable drop\t%s points (80%% power)\n", pts1(*p.DetectableDrop))
	}
	fmt.Fprintf(tw, "  McNemar exact\tp = %.3g (%d pass→fail, %d fail→pass, over %d single-case groups)\n", p.McNemarP, p.Flips.PassToFail, p.Flips.FailToPass, p.McNemarGroups)
	fmt.Fprintf(tw, "  latency\t%s\n", measureLine(r.LatencyMS, " ms", 1))
	fmt.Fprintf(tw, "  tokens\t%s\n", measureLine(r.Tokens, "", 1))
	fmt.Fprintf(tw, "  cost\t%s\n", measureLine(r.Cost, r.costUnit(), 4))
	tw.Flush()
	writePassAtK(w, r)
	if r.Unmatched != (stats.Unmatched{}) {
		fmt.Fprintf(w, "\nunmatched: %d cases only in the baseline, %d only in the candidate (counted in each run's own figures; in the paired ones only through a repeat group both runs have)\n", r.Unmatched.BaselineOnly, r.Unmatched.CandidateOnly)
	}
	for _, x := range []*runReport{&r.Baseline, &r.Candidate} {
		how := "computed here"
		if x.ServiceResult != "" {
			how = "the service's, from " + x.ServiceResult
		}
		fmt.Fprintf(w, "digest of %s: %s (%s)\n", x.RunID, strings.Join(x.Digests, ", "), how)
	}
	fmt.Fprintf(w, "\nverdict: %s\n", r.Message)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// notes are cautions about the verdict, which stays the rules' verdict:
//   - McNemar's exact test does not confirm a regression or an improvement
//     that the interval found, with its normal approximation, on few flips;
//   - the interval has no width: every group changed by the same amount, so
//     the paired standard error says nothing of changes too rare to have
//     happened in G groups (up to 3/G of them, the rule of three).
func (r *compareReport) notes() []string {
	p := &r.Paired
	notes := []string{}
	if (r.Verdict == stats.Regression || r.Verdict == stats.Improvement) && p.McNemarGroups == p.Groups && p.McNemarP >= 0.05 {
		notes = append(notes, fmt.Sprintf("McNemar's exact test does not confirm this at the 5%% level (p = %.3g, %d flips): with so few flips, treat the verdict with care",
			p.McNemarP, p.Flips.PassToFail+p.Flips.FailToPass))
	}
	if p.SE != nil && *p.SE < stats.Epsilon {
		notes = append(notes, fmt.Sprintf("every one of the %d groups changed by the same amount (%s points), so the interval has no width: changes in up to %s%% of the groups (3/G, the rule of three) could go unseen in a comparison this size",
			p.Groups, pts(*p.Diff), strconv.FormatFloat(100*3/float64(p.Groups), 'g', 3, 64)))
	}
	return notes
}

func writePassAtK(w io.Writer, r *compareReport) {
	if len(r.Baseline.PassAtK) == 0 && len(r.Candidate.PassAtK) == 0 {
		return
	}
	fmt.Fprintln(w, "\nwith repeats (averaged over each run's groups):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  k\tbaseline pass@k\tpass^k\tcandidate pass@k\tpass^k")
	n := max(len(r.Baseline.PassAtK), len(r.Candidate.PassAtK))
	cell := func(rows []stats.PassAtKRow, i int) string {
		if i >= len(rows) {
			return "\t"
		}
		return pct(rows[i].PassAtK) + "\t" + pct(rows[i].PassHatK)
	}
	for i := 0; i < n; i++ {
		fmt.Fprintf(tw, "  %d\t%s\t%s\n", i+1, cell(r.Baseline.PassAtK, i), cell(r.Candidate.PassAtK, i))
	}
	tw.Flush()
}

// maxListed bounds the case ids a Markdown comment lists per direction.
const maxListed = 20

func (r *compareReport) writeMarkdown(w io.Writer) {
	p := &r.Paired
	fmt.Fprintf(w, "### evalmeter compare: %s\n\n", strings.ReplaceAll(string(r.Verdict), "_", " "))
	fmt.Fprintf(w, "%s.\n\n", upperFirst(r.Message))
	fmt.Fprintln(w, "| | baseline | candidate |")
	fmt.Fprintln(w, "|---|---|---|")
	fmt.Fprintf(w, "| run | `%s` | `%s` |\n", r.Baseline.RunID, r.Candidate.RunID)
	fmt.Fprintf(w, "| cases | %d | %d |\n", r.Baseline.Cases, r.Candidate.Cases)
	fmt.Fprintf(w, "| pass rate (95%% CI) | %s (%s–%s) | %s (%s–%s) |\n",
		pct(r.Baseline.PassRate), pct(r.Baseline.Wilson95.Lo()), pct(r.Baseline.Wilson95.Hi()),
		pct(r.Candidate.PassRate), pct(r.Candidate.Wilson95.Lo()), pct(r.Candidate.Wilson95.Hi()))
	if r.Unmatched != (stats.Unmatched{}) {
		fmt.Fprintf(w, "| unmatched cases | %d | %d |\n", r.Unmatched.BaselineOnly, r.Unmatched.CandidateOnly)
	}
	for i := range max(len(r.Baseline.PassAtK), len(r.Candidate.PassAtK)) {
		cell := func(rows []stats.PassAtKRow) string {
			if i >= len(rows) {
				return ""
			}
			return pct(rows[i].PassAtK) + " / " + pct(rows[i].PassHatK)
		}
		fmt.Fprintf(w, "| pass@%d / pass^%d | %s | %s |\n", i+1, i+1, cell(r.Baseline.PassAtK), cell(r.Candidate.PassAtK))
	}
	fmt.Fprintf(w, "| SHA-256 | %s | %s |\n", mdDigests(&r.Baseline), mdDigests(&r.Candidate))

	fmt.Fprintf(w, "\n| paired over %d groups | candidate − baseline |\n|---|---|\n", p.Groups)
	if p.Diff != nil {
		fmt.Fprintf(w, "| pass rate | %s points (95%% CI %s) |\n", pts(*p.Diff), ptsInterval(p.CI95))
	}
	if p.DetectableDrop != nil {
		fmt.Fprintf(w, "| smallest detectable drop (80%% power) | %s points |\n", pts1(*p.DetectableDrop))
	}
	fmt.Fprintf(w, "| McNemar exact p | %.3g (%d pass→fail, %d fail→pass) |\n", p.McNemarP, p.Flips.PassToFail, p.Flips.FailToPass)
	fmt.Fprintf(w, "| latency | %s |\n", measureLine(r.LatencyMS, " ms", 1))
	fmt.Fprintf(w, "| tokens | %s |\n", measureLine(r.Tokens, "", 1))
	fmt.Fprintf(w, "| cost | %s |\n", measureLine(r.Cost, r.costUnit(), 4))

	listCases(w, "Pass → fail", r.FlippedCases.PassToFail)
	listCases(w, "Fail → pass", r.FlippedCases.FailToPass)
	listCases(w, "Only in the baseline", r.UnmatchedCases.BaselineOnly)
	listCases(w, "Only in the candidate", r.UnmatchedCases.CandidateOnly)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\n%s\n", upperFirst(n))
	}
	fmt.Fprintf(w, "\n<sub>Tolerated drop: %s points. Computed by `evalmeter compare` on the CI machine, from ids and outcomes only.</sub>\n", points(r.MaxDrop))
}

func mdDigests(r *runReport) string {
	var parts []string
	for _, d := range r.Digests {
		parts = append(parts, "`"+d+"`")
	}
	s := strings.Join(parts, "<br>")
	if r.ServiceResult != "" {
		s += " (the service's)"
	}
	return s
}

func listCases(w io.Writer, title string, ids []string) {
	if len(ids) == 0 {
		return
	}
	fmt.Fprintf(w, "\n**%s (%d):** ", title, len(ids))
	shown := ids[:min(len(ids), maxListed)]
	for i, id := range shown {
		if i > 0 {
			fmt.Fprint(w, ", ")
		}
		fmt.Fprintf(w, "`%s`", id)
	}
	if len(ids) > len(shown) {
		fmt.Fprintf(w, " and %d more", len(ids)-len(shown))
	}
	fmt.Fprintln(w)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
