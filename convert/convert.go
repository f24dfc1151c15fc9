// Package convert turns the results file of an evaluation tool into an
// evalmeter metrics request (docs/design.md#36-metrics-request, docs/design.md#12-converters).
//
// Only numbers, enums and identifiers leave a converter: a case's id, status,
// latency, token counts, cost, tool check names and outcomes, and trace step
// counts. Prompts, inputs, outputs, messages, explanations, metadata and test
// output are skipped by a streaming decoder without being kept, so a results
// file of hundreds of megabytes is read in one pass and one case at a time.
//
//	res, err := convert.Convert([]string{"junit.xml"}, convert.Options{Format: "junit"})
//	if err != nil { ... }
//	body, err := res.Request.Marshal()
package convert

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/evalmeter/evalmeter/internal/metrics"
)

// MaxCases is the number of cases one metrics request may hold.
const MaxCases = metrics.MaxCases

// Status is a case's outcome.
type Status string

const (
	Pass    Status = "pass"
	Fail    Status = "fail"
	Error   Status = "error"
	Timeout Status = "timeout"
)

// Request is a metrics request (docs/design.md#36-metrics-request).
//
// Its fields, and Case's, are in the order RFC 8785 sorts their names, so
// that Marshal writes the request in canonical form: the body the CLI
// posts is the payload whose SHA-256 the service returns, which anyone can
// check with sha256sum, and the service takes each case as it is written
// (docs/design.md#51-reading-the-body).
type Request struct {
	Cases        []Case `json:"cases"`
	CostCurrency string `json:"cost_currency,omitempty"`
	RunID        string `json:"run_id"`
}

// Case is one case observation. A nil pointer is a value the tool did not report.
type Case struct {
	ID           string      `json:"case_id"`
	Cost         *float64    `json:"cost,omitempty"`
	InputTokens  *int64      `json:"input_tokens,omitempty"`
	LatencyMS    float64     `json:"latency_ms"`
	OutputTokens *int64      `json:"output_tokens,omitempty"`
	RepeatGroup  string      `json:"repeat_group,omitempty"`
	Status       Status      `json:"status"`
	ToolChecks   []ToolCheck `json:"tool_checks,omitempty"`
	Trace        *Trace      `json:"trace,omitempty"`
}

// ToolCheck is one named check of a case.
type ToolCheck struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
}

// Trace counts the steps a case was expected to take and took.
type Trace struct {
	ExpectedSteps int `json:"expected_steps"`
	ObservedSteps int `json:"observed_steps"`
}

// Marshal returns the request as compact JSON, the form that is posted:
// its canonical form (RFC 8785), which the service hashes.
func (r *Request) Marshal() ([]byte, error) { return json.Marshal(r) }

// Options controls a conversion.
type Options struct {
	// Format is one of Formats, or "auto" (or "") to detect it from the content.
	Format string
	// RunID is the request's run_id. When empty, the tool's own run id is used
	// where it has one, else one derived from the cases, so that converting the
	// same results again gives the same request.
	RunID string
	// Currency is the cost_currency of reported costs: EUR, USD or GBP.
	// The tools all report USD, the default.
	Currency string
	// IDKey, when set, replaces case ids and repeat groups by keyed hashes
	// (HMAC-SHA256), for test names that are themselves sensitive.
	IDKey []byte
	// Split allows more than MaxCases cases, for Request.Parts to cut into parts.
	Split bool
	// Filter is the lm-evaluation-harness filter whose lines are read; ""
	// takes the filter of each samples file's first line.
	Filter string
	// PassThreshold, when set, counts a score of at least it as a pass:
	// lm-evaluation-harness metrics that are not 1 or 0, evaluation scores
	// on OpenTelemetry traces.
	PassThreshold *float64
	// CaseAttribute, RepeatAttribute and ExpectedStepsAttribute name the
	// span attributes of OpenTelemetry traces that hold the case's id, its
	// repeat group and the steps it was expected to take.
	CaseAttribute, RepeatAttribute, ExpectedStepsAttribute string
}

// Result is a converted request and what the conversion had to change.
type Result struct {
	Format  string
	Request Request
	// Warnings are counted: one line per kind of change, never one per case.
	Warnings []string
}

// A format reads the results of one tool.
type format struct {
	name string
	// read streams the cases of one file or directory into s. It returns
	// errNotFormat when the content is recognisably not this format.
	read func(path string, s *sink) error
	// looks reports whether a JSON document of this shape is this format's.
	// Formats whose files are not JSON documents leave it nil.
	looks func(sh *shape) bool
}

// formats lists the formats in the order auto detection tries them.
var formats = []format{
	{name: "inspect", read: readInspect, looks: looksInspect},
	{name: "promptfoo", read: readPromptfoo, looks: looksPromptfoo},
	{name: "tau2", read: readTau2, looks: looksTau2},
	{name: "deepeval", read: readDeepEval, looks: looksDeepEval},
	{name: "swebench", read: readSWEBench, looks: looksSWEBench},
	{name: "lmeval", read: readLmeval, looks: looksLmeval},
	{name: "otel", read: readOtel, looks: looksOtel},
	{name: "junit", read: readJUnit},
}

// Formats returns the names of the formats Convert reads.
func Formats() []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.name
	}
	return names
}

func lookup(name string) (format, bool) {
	for _, f := range formats {
		if f.name == name {
			return f, true
		}
	}
	return format{}, false
}

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// Convert reads the results files of one format and returns one request.
//
// Its errors are a *WrongFormatError when a file is not the format asked for,
// an *UnusableError when the results cannot make a valid request (no case,
// more than MaxCases, an unscored log), and other errors when a file cannot
// be read or is malformed. No error message quotes the content of a file.
func Convert(paths []string, opts Options) (*Result, error) {
	if len(paths) == 0 {
		return nil, errors.New("no results file given")
	}
	if opts.RunID != "" && !runIDPattern.MatchString(opts.RunID) {
		return nil, fmt.Errorf("run id %q: use 1 to 128 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit", opts.RunID)
	}
	currency := opts.Currency
	if currency == "" {
		currency = "USD"
	}
	if currency != "EUR" && currency != "USD" && currency != "GBP" {
		return nil, fmt.Errorf("currency %q: use EUR, USD or GBP", opts.Currency)
	}

	name := opts.Format
	if name == "" || name == "auto" {
		var err error
		if name, err = DetectFiles(paths); err != nil {
			return nil, err
		}
	}
	if name == FormatRequest {
		return nil, fmt.Errorf("%s is a metrics request already, not a tool's results: nothing to convert; evalmeter submit posts it as it is", paths[0])
	}
	f, ok := lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown format %q: use one of %s, or auto", name, strings.Join(Formats(), ", "))
	}

	s := newSink()
	s.opts = &opts
	for _, p := range paths {
		s.beginFile()
		err := f.read(p, s)
		if errors.Is(err, errNotFormat) {
			looks, _ := Detect(p)
			if looks == f.name { // recognised at a glance, refused on reading
				looks = ""
			}
			return nil, &WrongFormatError{Path: p, Format: f.name, Looks: looks}
		}
		if err != nil {
			return nil, err
		}
	}
	for _, after := range s.afterRead {
		after()
	}
	if err := s.otelUsable(); err != nil {
		return nil, err
	}
	if err := s.usable(f.name, opts.Split); err != nil {
		return nil, err
	}
	s.finish(opts.IDKey)

	req := Request{RunID: opts.RunID, Cases: s.cases}
	if req.RunID == "" {
		req.RunID = s.runID
	}
	for _, c := range req.Cases {
		if c.Cost != nil {
			req.CostCurrency = currency
			break
		}
	}
	if req.RunID == "" {
		req.RunID = derivedRunID(f.name, &req)
	}
	return &Result{Format: f.name, Request: req, Warnings: s.warnings()}, nil
}

// derivedRunID names a run by its format and cases, so that converting the
// same results twice gives the same run id, and the same digest.
func derivedRunID(format string, req *Request) string {
	b, _ := json.Marshal(req)
	sum := sha256.Sum256(b)
	return format + "-" + hex.EncodeToString(sum[:6])
}

// errNotFormat is returned by a reader whose file is not of its format.
var errNotFormat = errors.New("not this format")

// WrongFormatError reports a file that is not the format asked for.
type WrongFormatError struct {
	Path   string
	Format string // asked for
	Looks  string // detected; "" when unknown
}

func (e *WrongFormatError) Error() string {
	if e.Looks == "" {
		return fmt.Sprintf("%s: not %s results, nor any format evalmeter reads (%s)", e.Path, e.Format, strings.Join(Formats(), ", "))
	}
	if e.Looks == FormatRequest {
		return fmt.Sprintf("%s: not %s results; it is a metrics request (evalmeter submit posts it as it is, without --from)", e.Path, e.Format)
	}
	return fmt.Sprintf("%s: not %s results; it looks like %s results (use --from %s)", e.Path, e.Format, e.Looks, e.Looks)
}

// UnusableError reports results that cannot make a valid request.
type UnusableError struct {
	Reason string
	Hint   string // what to do
}

func (e *UnusableError) Error() string { return e.Reason + ": " + e.Hint }
