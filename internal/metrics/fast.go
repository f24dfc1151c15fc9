package metrics

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// The fast path (docs/design.md#51-reading-the-body). Nearly every
// request is valid and plain: known members only, identifiers and enums
// with no escapes. readFast reads such a request straight from its bytes,
// without the structural index and without the bookkeeping that exact
// errors need: each object's members are bits, each value is read where it
// starts.
//
// At the first thing it does not expect, valid or not (an escape, a byte
// that no identifier holds, an unknown member, a value out of range, a
// missing member), it gives up, and the careful parser reads the body from
// the start. So the fast path decides nothing on its own: it accepts only
// requests that the careful parser accepts, and gives them the same
// canonical form and the same counts, through the same number reader,
// canonical writer and tally. TestFastPathAgrees and FuzzFastPath compare
// the two.

// readFast reads the request in p.data into p.req and p.canon. It reports
// false when the careful parser must read the body instead; p is then
// half-written, for restart to undo.
func (p *parser) readFast() bool {
	d := p.data
	i := skipWS(d, 0)
	if i >= len(d) || d[i] != '{' || uint64(len(d)) > math.MaxUint32 {
		return false
	}
	r := p.req
	var seen uint32
	i, ok := firstMember(d, i+1)
	for ok {
		var bit uint32
		if bit, i = memberAt(requestNames, d, i); bit == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		switch bit {
		case memberRunID:
			r.runID, i, ok = idAt(d, i, MaxIDLength)
		case memberCostCurrency:
			r.costCurrency, i, ok = idAt(d, i, len("USD"))
			ok = ok && validCurrency(r.costCurrency)
		case memberCases:
			i, ok = p.fastCases(d, i)
		}
		if !ok {
			return false
		}
		if i, ok = nextMember(d, i); i < 0 {
			return false
		}
	}
	if i < 0 || skipWS(d, i) != len(d) {
		return false
	}
	return seen&(memberRunID|memberCases) == memberRunID|memberCases &&
		(seen&memberCostCurrency != 0 || len(r.tally.costs) == 0)
}

// fastCases reads the cases array at d[i], counting and writing each case
// as it is read, and returns where it ends.
func (p *parser) fastCases(d []byte, i int) (int, bool) {
	if i >= len(d) || d[i] != '[' {
		return i, false
	}
	if i = skipWS(d, i+1); i >= len(d) || d[i] == ']' {
		return i, false // no case: the careful parser says so
	}
	p.beginCases()
	for n := 0; ; n++ {
		if n == MaxCases {
			return i, false
		}
		var canonical []byte // the case's canonical form, when it is its bytes
		end, ok := canonicalCase(d, i, &p.kase)
		if ok {
			canonical = d[i:end]
		} else if end, ok = p.fastCase(d, i, &p.kase); !ok {
			return end, false
		}
		i = end
		if _, added := p.ids.add(p.kase.id); !added {
			return i, false
		}
		p.addCase(n, canonical)
		if i = skipWS(d, i); i >= len(d) {
			return i, false
		}
		switch d[i] {
		case ']':
			return i + 1, true
		case ',':
			i = skipWS(d, i+1)
		default:
			return i, false
		}
	}
}

// fastCase reads the case object at d[i] into c and returns where it ends.
func (p *parser) fastCase(d []byte, i int, c *observation) (int, bool) {
	if i >= len(d) || d[i] != '{' {
		return i, false
	}
	c.reset()
	var seen uint32
	i, ok := firstMember(d, i+1)
	for ok {
		var bit uint32
		if bit, i = memberAt(caseNames, d, i); bit == 0 || seen&bit != 0 {
			return i, false
		}
		seen |= bit
		switch bits.TrailingZeros32(bit) {
		case indexCaseID:
			c.id, i, ok = idAt(d, i, MaxIDLength)
		case indexStatus:
			c.status, i, ok = statusAt(d, i)
		case indexLatency:
			i, ok = numberAt(d, i, &c.latency, MaxLatencyMS, false)
		case indexRepeatGroup:
			c.repeatGroup, i, ok = idAt(d, i, MaxIDLength)
			c.has |= hasRepeatGroup
		case indexInput:
			i, ok = numberAt(d, i, &c.input, MaxTokens, true)
			c.has |= hasInput
		case indexOutput:
			i, ok = numberAt(d, i, &c.output, MaxTokens, true)
			c.has |= hasOutput
		case indexCost:
			i, ok = numberAt(d, i, &c.cost, MaxCost, false)
			c.has |= hasCost
		case indexToolChecks:
			i, ok = fastToolChecks(d, i, c)
			c.has |= hasToolChecks
		case indexViolations:
			i, ok = fastViolations(d, i, c)
			c.has |= hasViolations
		case indexTrace:
			i, ok = fastTrace(d, i, c)
			c.has |= hasTrace
		}
		if !ok {
			return i, false
		}
		if i, ok = nextMember(d, i); i < 0 {
			return i, false
		}
	}
	const required = memberCaseID | memberStatus | memberLatency
	return i, i >= 0 && seen&required == required
}

// canonicalCase reads the case at d[i] when it is written in canonical
// form, as the CLI writes it: members in RFC 8785 order, no white space,
// numbers as ECMAScript writes them (docs/design.md#51-reading-the-body).
// Its canonical form is then its own bytes, and nothing needs writing. It
// reports false at the first byte that canonical form would not have
// there, for fastCase to read the case instead.
func canonicalCase(d []byte, i int, c *observation) (int, bool) {
	if string(next(d, i, 2)) != `{"` { // before reset, which fastCase would repeat
		return i, false
	}
	c.reset()
	i++
	ok := true
	if string(next(d, i, 16)) == `"boundary_violat` && string(next(d, i+16, 7)) == `ions":[` {
		c.has |= hasViolations
		if i, ok = canonicalViolations(d, i+len(`"boundary_violations":[`), c); !ok || string(next(d, i, 1)) != `,` {
			return i, false
		}
		i++
	}
	if string(next(d, i, 10)) != `"case_id":` {
		return i, false
	}
	if c.id, i, ok = idAt(d, i+len(`"case_id":`), MaxIDLength); !ok {
		return i, false
	}
	if string(next(d, i, 8)) == `,"cost":` {
		c.has |= hasCost
		if i, ok = canonicalNumberAt(d, i+len(`,"cost":`), &c.cost, MaxCost, false); !ok {
			return i, false
		}
	}
	if string(next(d, i, 16)) == `,"input_tokens":` {
		c.has |= hasInput
		if i, ok = canonicalNumberAt(d, i+len(`,"input_tokens":`), &c.input, MaxTokens, true); !ok {
			return i, false
		}
	}
	if string(next(d, i, 14)) != `,"latency_ms":` {
		return i, false
	}
	if i, ok = canonicalNumberAt(d, i+len(`,"latency_ms":`), &c.latency, MaxLatencyMS, false); !ok {
		return i, false
	}
	if string(next(d, i, 16)) == `,"output_tokens"` && string(next(d, i+16, 1)) == `:` {
		c.has |= hasOutput
		if i, ok = canonicalNumberAt(d, i+len(`,"output_tokens":`), &c.output, MaxTokens, true); !ok {
			return i, false
		}
	}
	if string(next(d, i, 16)) == `,"repeat_group":` {
		c.has |= hasRepeatGroup
		if c.repeatGroup, i, ok = idAt(d, i+len(`,"repeat_group":`), MaxIDLength); !ok {
			return i, false
		}
	}
	if string(next(d, i, 10)) != `,"status":` {
		return i, false
	}
	if c.status, i, ok = statusAt(d, i+len(`,"status":`)); !ok {
		return i, false
	}
	if string(next(d, i, 16)) == `,"tool_checks":[` {
		c.has |= hasToolChecks
		if i, ok = canonicalToolChecks(d, i+len(`,"tool_checks":[`), c); !ok {
			return i, false
		}
	}
	if string(next(d, i, 16)) == `,"trace":{"expec` && string(next(d, i+16, 11)) == `ted_steps":` {
		c.has |= hasTrace
		if i, ok = canonicalNumberAt(d, i+len(`,"trace":{"expected_steps":`), &c.expected, MaxSteps, true); !ok || string(next(d, i, 16)) != `,"observed_steps` || string(next(d, i+16, 2)) != `":` {
			return i, false
		}
		if i, ok = canonicalNumberAt(d, i+len(`,"observed_steps":`), &c.observed, MaxSteps, true); !ok || string(next(d, i, 1)) != `}` || c.observed.f > c.expected.f {
			return i, false
		}
		i++
	}
	if string(next(d, i, 1)) != `}` {
		return i, false
	}
	return i + 1, true
}

// canonicalViolations reads the codes that follow a '[' at d[i] up to
// its ']', and returns the index after it. It and canonicalToolChecks are
// one loop written twice: taking the element's reader as a function made
// the engine 2 % slower.
func canonicalViolations(d []byte, i int, c *observation) (int, bool) {
	if string(next(d, i, 1)) == `]` {
		return i + 1, true
	}
	for {
		if len(c.reported) == MaxViolations {
			return i, false
		}
		code, j, ok := violationAt(d, i)
		if !ok || j >= len(d) {
			return i, false
		}
		c.reported = append(c.reported, code)
		switch i = j + 1; d[j] {
		case ']':
			return i, true
		case ',':
		default:
			return j, false
		}
	}
}

// canonicalToolChecks reads the tool checks that follow a '[' at d[i] up
// to its ']', and returns the index after it.
func canonicalToolChecks(d []byte, i int, c *observation) (int, bool) {
	if string(next(d, i, 1)) == `]` {
		return i + 1, true
	}
	for {
		var tc toolCheck
		j, ok := compactToolCheck(d, i, &tc)
		if !ok || len(c.checks) == MaxToolChecks || j >= len(d) {
			return i, false
		}
		c.checks = append(c.checks, tc)
		switch i = j + 1; d[j] {
		case ']':
			return i, true
		case ',':
		default:
			return j, false
		}
	}
}

// canonicalNumberAt is numberAt for a number whose literal is its
// canonical form.
func canonicalNumberAt(d []byte, i int, n *number, max float64, integer bool) (int, bool) {
	i, ok := numberAt(d, i, n, max, integer)
	return i, ok && n.litEnd > 0
}

func fastToolChecks(d []byte, i int, c *observation) (int, bool) {
	i, ok := firstElement(d, i)
	for ok {
		if len(c.checks) == MaxToolChecks || i >= len(d) || d[i] != '{' {
			return i, false
		}
		var tc toolCheck
		if j, compact := compactToolCheck(d, i, &tc); compact {
			c.checks = append(c.checks, tc)
			if i, ok = nextElement(d, j); i < 0 {
				return i, false
			}
			continue
		}
		var seen uint32
		for i, ok = firstMember(d, i+1); ok; {
			var bit uint32
			if bit, i = memberAt(toolCheckNames, d, i); bit == 0 || seen&bit != 0 {
				return i, false
			}
			seen |= bit
			switch bit {
			case memberName:
				tc.name, i, ok = idAt(d, i, MaxToolNameLength)
			case memberPassed:
				tc.passed, i, ok = boolAt(d, i)
			}
			if !ok {
				return i, false
			}
			if i, ok = nextMember(d, i); i < 0 {
				return i, false
			}
		}
		if i < 0 || seen != memberName|memberPassed {
			return i, false
		}
		c.checks = append(c.checks, tc)
		if i, ok = nextElement(d, i); i < 0 {
			return i, false
		}
	}
	return i, i >= 0
}

// compactToolCheck reads the tool check at d[i] ('{') when it is
// written as compact JSON writes it, name first, and returns where it ends.
func compactToolCheck(d []byte, i int, tc *toolCheck) (int, bool) {
	if string(next(d, i, 8)) != `{"name":` {
		return i, false
	}
	name, j, ok := idAt(d, i+len(`{"name":`), MaxToolNameLength)
	if !ok || string(next(d, j, 10)) != `,"passed":` {
		return i, false
	}
	passed, j, ok := boolAt(d, j+len(`,"passed":`))
	if !ok || string(next(d, j, 1)) != `}` {
		return i, false
	}
	tc.name, tc.passed = name, passed
	return j + 1, true
}

func fastViolations(d []byte, i int, c *observation) (int, bool) {
	i, ok := firstElement(d, i)
	for ok {
		if len(c.reported) == MaxViolations {
			return i, false
		}
		var code violation
		if code, i, ok = violationAt(d, i); !ok {
			return i, false
		}
		c.reported = append(c.reported, code)
		if i, ok = nextElement(d, i); i < 0 {
			return i, false
		}
	}
	return i, i >= 0
}

func fastTrace(d []byte, i int, c *observation) (int, bool) {
	if i >= len(d) || d[i] != '{' {
		return i, false
	}
	var seen uint32
	i, ok := firstMember(d, i+1)
	for ok {
		var bit uint32
		if bit, i = memberAt(traceNames, d, i); bit == 0 || seen&bit != 0 {
			return i, false
		}
		seen |= bit
		switch bit {
		case memberExpected:
			i, ok = numberAt(d, i, &c.expected, MaxSteps, true)
		case memberObserved:
			i, ok = numberAt(d, i, &c.observed, MaxSteps, true)
		}
		if !ok {
			return i, false
		}
		if i, ok = nextMember(d, i); i < 0 {
			return i, false
		}
	}
	return i, i >= 0 && seen == memberExpected|memberObserved && c.observed.f <= c.expected.f
}

// memberAt reads the member name at d[i] ('"'), one of t's, and the ':'
// after it, and returns the name's bit and where the value starts: 0 for
// a name t does not have, or one spelled with an escape, which the careful
// parser reads.
func memberAt(t *wordTable, d []byte, i int) (uint32, int) {
	if e, ok := t.at(d, i); ok {
		return e.value, valueAt(d, i+e.size)
	}
	return 0, i
}

// valueAt reads the ':' after a member name, which ends at d[i-1], and the
// white space around it, and returns where the value starts; len(d) when
// there is no ':', which no value reader accepts.
func valueAt(d []byte, i int) int {
	if i+1 < len(d) && d[i] == ':' && d[i+1] > ' ' { // compact JSON
		return i + 1
	}
	if i = skipWS(d, i); i < len(d) && d[i] == ':' {
		return skipWS(d, i+1)
	}
	return len(d)
}

// The fast path's steps. Each takes the index of its first byte and
// returns the index after what it read; a step between values returns -1
// where the grammar is broken or unexpected.

// skipWS returns the index of the first byte at or after i that is not
// JSON white space.
func skipWS(d []byte, i int) int {
	for i < len(d) && d[i] <= ' ' && isSpace(d[i]) {
		i++
	}
	return i
}

// firstMember reads past white space after an object's '{' and reports
// whether a member follows (true, at its name) or the object ends (false,
// after its '}'); -1 otherwise.
func firstMember(d []byte, i int) (int, bool) {
	if i = skipWS(d, i); i < len(d) {
		switch d[i] {
		case '"':
			return i, true
		case '}':
			return i + 1, false
		}
	}
	return -1, false
}

// nextMember reads past a member's value to the next member's name (true)
// or past the object's '}' (false); -1 otherwise.
func nextMember(d []byte, i int) (int, bool) {
	if i = skipWS(d, i); i < len(d) {
		switch d[i] {
		case ',':
			if i = skipWS(d, i+1); i < len(d) && d[i] == '"' {
				return i, true
			}
		case '}':
			return i + 1, false
		}
	}
	return -1, false
}

// firstElement reads an array's '[' at d[i] and the white space after it,
// and reports whether an element follows (true, at it) or the array ends
// (false, after its ']'); -1 otherwise.
func firstElement(d []byte, i int) (int, bool) {
	if i >= len(d) || d[i] != '[' {
		return -1, false
	}
	if i = skipWS(d, i+1); i < len(d) && d[i] == ']' {
		return i + 1, false
	}
	return i, true
}

// nextElement reads past an element to the next one (true) or past the
// array's ']' (false); -1 otherwise.
func nextElement(d []byte, i int) (int, bool) {
	if i = skipWS(d, i); i < len(d) {
		switch d[i] {
		case ',':
			return skipWS(d, i+1), true
		case ']':
			return i + 1, false
		}
	}
	return -1, false
}

// idAt reads a string at d[i] that is an identifier of at most max bytes
// (validID), and returns it and the index after its closing quote.
func idAt(d []byte, i, max int) ([]byte, int, bool) {
	if i >= len(d) || d[i] != '"' {
		return nil, i, false
	}
	start := i + 1
	j := idEnd(d, start)
	if j >= len(d) || d[j] != '"' || j == start || j-start > max || !isAlnum(d[start]) {
		return nil, j, false
	}
	return d[start:j], j + 1, true
}

// idEnd returns the index of the first byte at or after i that is not an
// identifier byte, or len(d).
func idEnd(d []byte, i int) int {
	for ; i+8 <= len(d); i += 8 {
		if m := notID(binary.LittleEndian.Uint64(d[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(d) && isIDByte(d[i]) {
		i++
	}
	return i
}

// next returns d[i:i+n], or nil where d ends before, for comparing with
// a constant: string(next(d, i, 8)) == `{"name":`. The compiler compares
// a constant of up to 16 bytes in place, without a call to memequal,
// where it sees the constant; so longer ones are compared in two.
func next(d []byte, i, n int) []byte {
	if i+n > len(d) {
		return nil
	}
	return d[i : i+n]
}

// statusAt reads a status at d[i].
func statusAt(d []byte, i int) (status, int, bool) {
	if e, ok := statuses.at(d, i); ok {
		return status(e.value), i + e.size, true
	}
	return 0, i, false
}

// violationAt reads a boundary violation code at d[i].
func violationAt(d []byte, i int) (violation, int, bool) {
	if e, ok := violations.at(d, i); ok {
		return violation(e.value), i + e.size, true
	}
	return 0, i, false
}

// numberAt reads the number at d[i] into n, and returns where it ends; n
// must be from 0 to max, and an integer if integer is set.
func numberAt(d []byte, i int, n *number, max float64, integer bool) (int, bool) {
	end, ok := shortNumber(d, i, n)
	if !ok {
		var bad numberError
		if end, bad = scanAnyNumber(d, i, n); bad != numberOK {
			return end, false
		}
	}
	return end, n.within(max, integer)
}

// boolAt reads true or false at d[i].
func boolAt(d []byte, i int) (v bool, end int, ok bool) {
	if string(next(d, i, 4)) == "true" {
		return true, i + 4, true
	}
	if string(next(d, i, 5)) == "false" {
		return false, i + 5, true
	}
	return false, i, false
}
