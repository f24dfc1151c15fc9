package metrics

import (
	"math/bits"

	"github.com/evalmeter/evalmeter/internal/swar"
)

// Limits of the metrics request (docs/design.md#38-limits).
const (
	MaxBodyBytes      = 262144
	MaxCases          = 500
	MaxIDLength       = 128
	MaxToolNameLength = 80
	MaxToolChecks     = 32
	MaxViolations     = 32
	MaxLatencyMS      = 86400000
	MaxTokens         = 1000000000
	MaxCost           = 1000000
	MaxSteps          = 100000
)

// Request is a validated metrics request (docs/design.md#36-metrics-request), reduced to what its
// metrics need: the counts of its cases and the digest of its canonical form.
// Its strings point into the body it was parsed from, which must not change
// while it is in use.
type Request struct {
	runID        []byte
	costCurrency []byte // nil when absent
	tally        tally
	digest       [32]byte
}

// reset empties r for the next request, keeping its storage.
func (r *Request) reset() {
	r.tally.reset()
	*r = Request{tally: r.tally}
}

// observation is the CaseObservation being read.
type observation struct {
	id          []byte
	repeatGroup []byte // nil when absent
	status      status
	has         present
	latency     number
	cost        number
	input       number
	output      number
	expected    number // trace.expected_steps
	observed    number // trace.observed_steps
	checks      []toolCheck
	reported    []violation
}

// reset empties c for the next case, keeping its lists' storage.
func (c *observation) reset() {
	*c = observation{checks: c.checks[:0], reported: c.reported[:0]}
}

// present records which optional members a case carries, so that the
// canonical form keeps exactly what was received.
type present uint8

const (
	hasRepeatGroup present = 1 << iota
	hasInput
	hasOutput
	hasCost
	hasToolChecks
	hasViolations
	hasTrace
)

type toolCheck struct {
	name   []byte
	passed bool
}

type status uint8

const (
	statusPass status = iota
	statusFail
	statusError
	statusTimeout
)

// statusNames are the statuses' names, by status.
var statusNames = [...]string{statusPass: "pass", statusFail: "fail", statusError: "error", statusTimeout: "timeout"}

func (s status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return ""
}

// violation is a boundary violation code; its value is its bit in a case's set.
type violation uint8

const (
	dataBoundary violation = 1 << iota
	instructionOverride
	policyBoundary
	scopeEscape
	unauthorizedTool
)

// violationNames are the codes' names, by the index of their bit.
var violationNames = [...]string{"data_boundary", "instruction_override", "policy_boundary", "scope_escape", "unauthorized_tool"}

func (v violation) String() string {
	if k := v.index(); k < len(violationNames) && v == 1<<k {
		return violationNames[k]
	}
	return ""
}

// index is the index of v's bit, in violationNames.
func (v violation) index() int { return bits.TrailingZeros8(uint8(v)) }

// statuses and violations are the enums' names, with their values.
var (
	statuses   = newWordTable(byName(statusNames[:], func(k int) uint32 { return uint32(k) }))
	violations = newWordTable(byName(violationNames[:], func(k int) uint32 { return 1 << k }))
)

func parseViolation(b []byte) (violation, bool) {
	v, ok := violations.lookup(b)
	return violation(v), ok
}

func parseStatus(b []byte) (status, bool) {
	v, ok := statuses.lookup(b)
	return status(v), ok
}

func validCurrency(b []byte) bool {
	switch string(b) {
	case "EUR", "USD", "GBP":
		return true
	}
	return false
}

// validID reports whether b matches ^[A-Za-z0-9][A-Za-z0-9._:-]{0,max-1}$,
// the pattern of run_id, case_id, repeat_group and tool check names. Such a
// string needs no escaping in JSON.
func validID(b []byte, max int) bool {
	if len(b) == 0 || len(b) > max || !isAlnum(b[0]) {
		return false
	}
	for _, c := range b[1:] {
		if !isIDByte(c) {
			return false
		}
	}
	return true
}

// The bytes of identifiers, as bits of two words: bytes 0-63 and 64-127.
const (
	idBytesLow  = 1<<'-' | 1<<'.' | (1<<10-1)<<'0' | 1<<':'
	idBytesHigh = (1<<26-1)<<('A'-64) | 1<<('_'-64) | (1<<26-1)<<('a'-64)
)

func isIDByte(c byte) bool {
	w := uint64(idBytesLow)
	if c >= 64 {
		w = idBytesHigh
	}
	return c < 128 && w>>(c&63)&1 != 0
}

// notID marks with its high bit each byte of w (8 bytes, little-endian)
// that is not an identifier byte (isIDByte), exactly.
func notID(w uint64) uint64 {
	const lower = 0x2020202020202020 // ORed in, folds each upper-case letter to lower case
	id := swar.Between(w|lower, 'a', 'z') |
		swar.Between(w, '0', ':') | swar.Between(w, '-', '.') | swar.Between(w, '_', '_')
	return swar.Highs &^ id
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
