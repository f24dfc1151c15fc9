package metrics

import (
	"crypto/sha256"
	"hash"
	"math"
	"slices"

	"github.com/evalmeter/evalmeter/api"
)

// What each field must be; a failing field's message is its path and its rule.
const (
	ruleID         = "must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-', starting with a letter or digit"
	ruleToolName   = "must be 1 to 80 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-', starting with a letter or digit"
	ruleCurrency   = "must be one of EUR, USD, GBP"
	ruleCases      = "must be an array of 1 to 500 case objects"
	ruleCase       = "must be a case object"
	ruleStatus     = "must be one of pass, fail, error, timeout"
	ruleLatency    = "must be a number from 0 to 86400000"
	ruleTokens     = "must be an integer from 0 to 1000000000"
	ruleCost       = "must be a number from 0 to 1000000"
	ruleToolChecks = "must be an array of at most 32 tool check objects"
	ruleToolCheck  = "must be a tool check object with name and passed"
	rulePassed     = "must be true or false"
	ruleViolations = "must be an array of at most 32 boundary violation codes"
	ruleViolation  = "must be one of scope_escape, unauthorized_tool, data_boundary, policy_boundary, instruction_override"
	ruleTrace      = "must be a trace object with expected_steps and observed_steps"
	ruleSteps      = "must be an integer from 0 to 100000"
	ruleObserved   = "must not exceed expected_steps"
	ruleDuplicate  = "repeats the case_id of an earlier case; each case must be reported once"
	ruleUnknown    = "is not a field of the metrics request (objects are closed; see the schema)"
	ruleRequired   = "is required"
	ruleCurrencyIf = "is required when any case reports cost"
)

// typicalCaseBytes sizes per-case storage from the body: cases are rarely
// smaller, and storage grows past it when they are. Sizing for the smallest
// possible case allocated several times what bodies of real cases need.
const typicalCaseBytes = 128

// typicalIDBytes and typicalGroupBytes size the sets of case_ids and
// repeat groups alike: an identifier of a case tends to be longer than the
// name of a group.
const (
	typicalIDBytes    = 32
	typicalGroupBytes = 8
)

// Parse reads and validates a metrics request. A body that is not I-JSON
// (RFC 7493: malformed, invalid UTF-8, duplicate names, trailing data) fails
// with api.CodeMalformedJSON; a well-formed body that breaks the schema fails
// with the first offending place in document order. A missing member is
// found at the end of its object, and the cost_currency rule at the end of
// the request.
//
// Each case is hashed in canonical form and counted as soon as it is read,
// so that nothing per case outlives it. A plain, valid body is read once,
// by the fast path; any other is read again by the careful parser, which
// finds its error (docs/design.md#51-reading-the-body).
func Parse(body []byte) (*Request, error) {
	return new(Meter).Parse(body)
}

// Canonical returns the RFC 8785 (JCS) form of a valid request as it was
// received: no member added, none dropped, boundary codes not de-duplicated.
// Its SHA-256 is the result's integrity.canonical_sha256.
func Canonical(body []byte) ([]byte, error) {
	p := newParser(body, nil)
	if _, err := p.parse(); err != nil {
		return nil, err
	}
	return p.canon, nil
}

// hashChunk is how much canonical form the parser holds before it hashes
// it: enough that a call to the hash costs nothing much, and little to
// allocate for every request.
const hashChunk = 2 << 10

type parser struct {
	data []byte
	pos  int // the next structural position (see cursor)
	cursor
	depth int
	err   *api.Error // first schema error
	req   *Request

	kase    observation // the case being read
	ids     byteSet     // case_ids seen
	anyCost bool
	hash    hash.Hash // of the canonical form; nil: keep it whole in canon
	canon   []byte    // canonical form not yet hashed
	careful bool      // skip the fast path: for tests that compare the two

	asWritten int // cases taken as their canonical form, for tests
}

// newParser returns a parser of body into a new Request, hashing with h
// as reset does; a Meter's parser is reset instead, to reuse its storage.
func newParser(body []byte, h hash.Hash) *parser {
	p := new(parser)
	p.reset(body, h, new(Request))
	return p
}

// reset prepares p to read body into r, hashing its canonical form with h
// (nil: keeping it whole in p.canon). It keeps the storage of the bodies
// p read before, which a Meter reuses.
func (p *parser) reset(body []byte, h hash.Hash, r *Request) {
	capacity := min(hashChunk+hashChunk/2, len(body)+64) // a chunk and a usual case
	if h == nil {
		capacity = len(body)
		p.canon = nil // returned by Canonical: not to be reused
	}
	*p = parser{
		data:   body,
		cursor: cursor{idx: p.idx[:0]},
		req:    r,
		kase: observation{
			checks:   slices.Grow(p.kase.checks[:0], 4), // grown by the first case with more
			reported: slices.Grow(p.kase.reported[:0], 4),
		},
		ids:   p.ids, // reset by beginCases
		hash:  h,
		canon: slices.Grow(p.canon[:0], capacity),
	}
	p.restart()
}

func (p *parser) parse() (*Request, error) {
	if p.careful || !p.readFast() {
		p.restart()
		if err := p.document(); err != nil {
			return nil, err
		}
		if p.err != nil {
			return nil, p.err
		}
	}
	r := p.req
	p.canon = r.appendTrailer(p.canon)
	if p.hash != nil {
		p.hash.Write(p.canon)
		p.hash.Sum(r.digest[:0])
	} else {
		r.digest = sha256.Sum256(p.canon)
	}
	return r, nil
}

// restart undoes what the fast path did before it gave up.
func (p *parser) restart() {
	p.req.reset()
	p.anyCost = false
	p.canon = p.canon[:0]
	if p.hash != nil {
		p.hash.Reset()
	}
}

func (p *parser) document() error {
	if uint64(len(p.data)) > math.MaxUint32 {
		return p.syntaxErrorAt(0, "the body is 4 GiB or more")
	}
	p.start()
	switch {
	case p.pos == len(p.data):
		return p.syntaxError("the body is empty; send a JSON object")
	case p.data[p.pos] == 0xEF:
		return p.syntaxError("the body starts with a byte order mark; send UTF-8 without one")
	case p.data[p.pos] == '{':
		if err := p.request(); err != nil {
			return err
		}
	default:
		if err := p.skip(); err != nil {
			return err
		}
		p.fail(api.CodeInvalidField, place{kase: -1, item: -1}, "the body must be a JSON object")
	}
	if p.pos != len(p.data) {
		return p.syntaxError("unexpected data after the JSON value")
	}
	return nil
}

// Known members of each object, as bits of names.known.
const (
	memberRunID uint32 = 1 << iota
	memberCostCurrency
	memberCases
)

// A case's members by index; each one's bit is 1 << its index. The fast
// path switches on the index, which the compiler makes one jump through a
// table: members come in any order.
const (
	indexCaseID = iota
	indexStatus
	indexLatency
	indexRepeatGroup
	indexInput
	indexOutput
	indexCost
	indexToolChecks
	indexViolations
	indexTrace
)

const (
	memberCaseID      uint32 = 1 << indexCaseID
	memberStatus      uint32 = 1 << indexStatus
	memberLatency     uint32 = 1 << indexLatency
	memberRepeatGroup uint32 = 1 << indexRepeatGroup
	memberInput       uint32 = 1 << indexInput
	memberOutput      uint32 = 1 << indexOutput
	memberCost        uint32 = 1 << indexCost
	memberToolChecks  uint32 = 1 << indexToolChecks
	memberViolations  uint32 = 1 << indexViolations
	memberTrace       uint32 = 1 << indexTrace
)

const (
	memberName uint32 = 1 << iota
	memberPassed
)

const (
	memberExpected uint32 = 1 << iota
	memberObserved
)

// Each object's member names, with their bits. The careful parser looks
// up a name it has read (lookup); the fast path the bytes at a name's
// opening quote (memberAt).
var (
	requestNames = newWordTable(map[string]uint32{
		"run_id":        memberRunID,
		"cost_currency": memberCostCurrency,
		"cases":         memberCases,
	})
	caseNames = newWordTable(map[string]uint32{
		"case_id":             memberCaseID,
		"status":              memberStatus,
		"latency_ms":          memberLatency,
		"repeat_group":        memberRepeatGroup,
		"input_tokens":        memberInput,
		"output_tokens":       memberOutput,
		"cost":                memberCost,
		"tool_checks":         memberToolChecks,
		"boundary_violations": memberViolations,
		"trace":               memberTrace,
	})
	toolCheckNames = newWordTable(map[string]uint32{
		"name":   memberName,
		"passed": memberPassed,
	})
	traceNames = newWordTable(map[string]uint32{
		"expected_steps": memberExpected,
		"observed_steps": memberObserved,
	})
)

func (p *parser) request() error {
	r := p.req
	var seen names
	more, err := p.beginObject()
	for more {
		name, at, err := p.memberName()
		if err != nil {
			return err
		}
		bit, _ := requestNames.lookup(name) // 0 for an unknown name
		if err := seen.add(p, bit, at, name); err != nil {
			return err
		}
		switch bit {
		case memberRunID:
			v, ok, err := p.id(MaxIDLength)
			if err != nil {
				return err
			}
			if !ok {
				p.fail(api.CodeInvalidField, top("run_id"), ruleID)
			}
			r.runID = v
		case memberCostCurrency:
			v, ok, err := p.str()
			if err != nil {
				return err
			}
			if !ok || !validCurrency(v) {
				p.fail(api.CodeInvalidField, top("cost_currency"), ruleCurrency)
			}
			r.costCurrency = v
		case memberCases:
			if err := p.cases(); err != nil {
				return err
			}
		default:
			if err := p.unknown(top(string(name))); err != nil {
				return err
			}
		}
		if more, err = p.nextMember(); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	if seen.known&memberRunID == 0 {
		p.fail(api.CodeMissingField, top("run_id"), ruleRequired)
	}
	if seen.known&memberCases == 0 {
		p.fail(api.CodeMissingField, top("cases"), ruleRequired)
	}
	if seen.known&memberCostCurrency == 0 && p.anyCost {
		p.fail(api.CodeMissingField, top("cost_currency"), ruleCurrencyIf)
	}
	return nil
}

func (p *parser) cases() error {
	if p.peek() != '[' {
		return p.wrongType(top("cases"), ruleCases)
	}
	p.beginCases()
	n := 0
	more, err := p.beginArray()
	for ; more; n++ {
		if n < MaxCases {
			err = p.observation(n)
		} else {
			p.fail(api.CodeInvalidField, top("cases"), ruleCases)
			err = p.skip()
		}
		if err != nil {
			return err
		}
		if more, err = p.nextElement(); err != nil {
			return err
		}
	}
	if err == nil && n == 0 {
		p.fail(api.CodeInvalidField, top("cases"), ruleCases)
	}
	return err
}

// beginCases prepares to count cases and write them in canonical form,
// where the cases come first: "cases" sorts before the request's other
// members.
func (p *parser) beginCases() {
	p.req.tally.init(min(MaxCases, len(p.data)/typicalCaseBytes+8))
	p.ids.reset(cap(p.req.tally.latencies), typicalIDBytes)
	p.canon = append(p.canon, `{"cases":[`...)
}

func (p *parser) observation(i int) error {
	if p.peek() != '{' {
		return p.wrongType(place{kase: i, item: -1}, ruleCase)
	}
	c := &p.kase
	c.reset()
	at := func(name string) place { return place{kase: i, item: -1, name: name} }
	check := func(ok bool, name, rule string) {
		if !ok {
			p.fail(api.CodeInvalidField, at(name), rule)
		}
	}
	var seen names
	more, err := p.beginObject()
	for more {
		name, nameAt, err := p.memberName()
		if err != nil {
			return err
		}
		bit, _ := caseNames.lookup(name) // 0 for an unknown name
		if err := seen.add(p, bit, nameAt, name); err != nil {
			return err
		}
		switch bit {
		case memberCaseID:
			err = p.caseID(i, c)
		case memberStatus:
			var v []byte
			var ok bool
			if v, ok, err = p.str(); ok {
				c.status, ok = parseStatus(v)
			}
			check(ok, "status", ruleStatus)
		case memberLatency:
			var ok bool
			ok, err = p.num(&c.latency, MaxLatencyMS, false)
			check(ok, "latency_ms", ruleLatency)
		case memberRepeatGroup:
			var ok bool
			c.repeatGroup, ok, err = p.id(MaxIDLength)
			check(ok, "repeat_group", ruleID)
			c.has |= hasRepeatGroup
		case memberInput:
			var ok bool
			ok, err = p.num(&c.input, MaxTokens, true)
			check(ok, "input_tokens", ruleTokens)
			c.has |= hasInput
		case memberOutput:
			var ok bool
			ok, err = p.num(&c.output, MaxTokens, true)
			check(ok, "output_tokens", ruleTokens)
			c.has |= hasOutput
		case memberCost:
			var ok bool
			ok, err = p.num(&c.cost, MaxCost, false)
			check(ok, "cost", ruleCost)
			c.has |= hasCost
			p.anyCost = true
		case memberToolChecks:
			c.has |= hasToolChecks
			err = p.toolChecks(i, c)
		case memberViolations:
			c.has |= hasViolations
			err = p.violations(i, c)
		case memberTrace:
			c.has |= hasTrace
			err = p.trace(i, c)
		default:
			err = p.unknown(at(string(name)))
		}
		if err != nil {
			return err
		}
		if more, err = p.nextMember(); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	for _, m := range [...]struct {
		bit  uint32
		name string
	}{{memberCaseID, "case_id"}, {memberStatus, "status"}, {memberLatency, "latency_ms"}} {
		if seen.known&m.bit == 0 {
			p.fail(api.CodeMissingField, at(m.name), ruleRequired)
		}
	}
	if p.err == nil {
		p.addCase(i, nil)
	}
	return nil
}

// addCase writes the valid case just read in canonical form and counts
// it. canonical is that form when the case was written in it (nil: write
// it).
func (p *parser) addCase(i int, canonical []byte) {
	if i > 0 {
		p.canon = append(p.canon, ',')
	}
	if canonical != nil {
		p.canon = append(p.canon, canonical...)
		p.asWritten++
	} else {
		p.canon = appendCase(p.canon, p.data, &p.kase)
	}
	if p.hash != nil && len(p.canon) >= hashChunk {
		p.hash.Write(p.canon)
		p.canon = p.canon[:0]
	}
	p.req.tally.add(&p.kase)
}

// caseID reads a case_id and checks its pattern and that no earlier case
// used it.
func (p *parser) caseID(i int, c *observation) error {
	v, ok, err := p.id(MaxIDLength)
	c.id = v
	switch {
	case !ok:
		p.fail(api.CodeInvalidField, place{kase: i, item: -1, name: "case_id"}, ruleID)
	case p.err != nil:
		// The request is refused already; spare the bookkeeping.
	default:
		if _, added := p.ids.add(v); !added {
			p.fail(api.CodeInvalidField, place{kase: i, item: -1, name: "case_id"}, ruleDuplicate)
		}
	}
	return err
}

func (p *parser) toolChecks(i int, c *observation) error {
	list := place{kase: i, group: "tool_checks", item: -1}
	if p.peek() != '[' {
		return p.wrongType(list, ruleToolChecks)
	}
	j := 0
	more, err := p.beginArray()
	for ; more; j++ {
		item := place{kase: i, group: "tool_checks", item: j}
		switch {
		case j >= MaxToolChecks:
			p.fail(api.CodeInvalidField, list, ruleToolChecks)
			err = p.skip()
		case p.peek() != '{':
			err = p.wrongType(item, ruleToolCheck)
		default:
			err = p.toolCheck(item, c)
		}
		if err != nil {
			return err
		}
		if more, err = p.nextElement(); err != nil {
			return err
		}
	}
	return err
}

func (p *parser) toolCheck(item place, c *observation) error {
	var tc toolCheck
	var seen names
	more, err := p.beginObject()
	for more {
		name, at, err := p.memberName()
		if err != nil {
			return err
		}
		bit, _ := toolCheckNames.lookup(name) // 0 for an unknown name
		if err := seen.add(p, bit, at, name); err != nil {
			return err
		}
		switch bit {
		case memberName:
			var ok bool
			if tc.name, ok, err = p.id(MaxToolNameLength); !ok {
				item.name = "name"
				p.fail(api.CodeInvalidField, item, ruleToolName)
			}
		case memberPassed:
			var ok bool
			if tc.passed, ok, err = p.boolean(); !ok {
				item.name = "passed"
				p.fail(api.CodeInvalidField, item, rulePassed)
			}
		default:
			item.name = string(name)
			err = p.unknown(item)
		}
		if err != nil {
			return err
		}
		if more, err = p.nextMember(); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	if seen.known&memberName == 0 {
		item.name = "name"
		p.fail(api.CodeMissingField, item, ruleRequired)
	}
	if seen.known&memberPassed == 0 {
		item.name = "passed"
		p.fail(api.CodeMissingField, item, ruleRequired)
	}
	c.checks = append(c.checks, tc)
	return nil
}

func (p *parser) violations(i int, c *observation) error {
	list := place{kase: i, group: "boundary_violations", item: -1}
	if p.peek() != '[' {
		return p.wrongType(list, ruleViolations)
	}
	j := 0
	more, err := p.beginArray()
	for ; more; j++ {
		if j >= MaxViolations {
			p.fail(api.CodeInvalidField, list, ruleViolations)
			err = p.skip()
		} else {
			var v []byte
			var ok bool
			var code violation
			if v, ok, err = p.str(); ok {
				code, ok = parseViolation(v)
			}
			if ok {
				c.reported = append(c.reported, code)
			} else {
				p.fail(api.CodeInvalidField, place{kase: i, group: "boundary_violations", item: j}, ruleViolation)
			}
		}
		if err != nil {
			return err
		}
		if more, err = p.nextElement(); err != nil {
			return err
		}
	}
	return err
}

func (p *parser) trace(i int, c *observation) error {
	at := func(name string) place { return place{kase: i, group: "trace", item: -1, name: name} }
	if p.peek() != '{' {
		return p.wrongType(at(""), ruleTrace)
	}
	var seen names
	more, err := p.beginObject()
	for more {
		name, nameAt, err := p.memberName()
		if err != nil {
			return err
		}
		bit, _ := traceNames.lookup(name) // 0 for an unknown name
		if err := seen.add(p, bit, nameAt, name); err != nil {
			return err
		}
		var ok bool
		switch bit {
		case memberExpected:
			if ok, err = p.num(&c.expected, MaxSteps, true); !ok {
				p.fail(api.CodeInvalidField, at("expected_steps"), ruleSteps)
			}
		case memberObserved:
			if ok, err = p.num(&c.observed, MaxSteps, true); !ok {
				p.fail(api.CodeInvalidField, at("observed_steps"), ruleSteps)
			}
		default:
			err = p.unknown(at(string(name)))
		}
		if err != nil {
			return err
		}
		if more, err = p.nextMember(); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	switch {
	case seen.known&memberExpected == 0:
		p.fail(api.CodeMissingField, at("expected_steps"), ruleRequired)
	case seen.known&memberObserved == 0:
		p.fail(api.CodeMissingField, at("observed_steps"), ruleRequired)
	case c.observed.f > c.expected.f:
		p.fail(api.CodeInvalidField, at("observed_steps"), ruleObserved)
	}
	return nil
}

// Typed values. Each reports ok=false when the value has the wrong type,
// which it skips, or is out of range; err is for malformed JSON only.

// str reads a string.
func (p *parser) str() (v []byte, ok bool, err error) {
	if p.peek() != '"' {
		return nil, false, p.skip()
	}
	v, err = p.readString()
	return v, err == nil, err
}

// id reads an identifier of at most max bytes (validID).
func (p *parser) id(max int) (v []byte, ok bool, err error) {
	v, ok, err = p.str()
	return v, ok && validID(v, max), err
}

// num reads into n a number from 0 to max, an integer if integer is set.
func (p *parser) num(n *number, max float64, integer bool) (ok bool, err error) {
	if c := p.peek(); c != '-' && !isDigit(c) {
		return false, p.skip()
	}
	if err := p.readNumber(n); err != nil {
		return false, err
	}
	return n.within(max, integer), nil
}

func (p *parser) boolean() (v, ok bool, err error) {
	switch p.peek() {
	case 't':
		return true, true, p.literal("true")
	case 'f':
		return false, true, p.literal("false")
	}
	return false, false, p.skip()
}

// wrongType skips a value of the wrong type and records the schema error.
func (p *parser) wrongType(pl place, rule string) error {
	if err := p.skip(); err != nil {
		return err
	}
	p.fail(api.CodeInvalidField, pl, rule)
	return nil
}

// unknown skips the value of an unknown member and records the schema error.
func (p *parser) unknown(pl place) error {
	if err := p.skip(); err != nil {
		return err
	}
	p.fail(api.CodeUnknownField, pl, ruleUnknown)
	return nil
}

func (p *parser) fail(code string, pl place, rule string) {
	if p.err != nil {
		return
	}
	field := pl.String()
	msg := rule
	if field != "" {
		msg = field + " " + rule
	}
	p.err = &api.Error{Code: code, Message: msg, Field: field}
}
