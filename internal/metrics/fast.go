package metrics

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/evalmeter/evalmeter/internal/swar"
)

// The fast path (docs/design.md §5.1). Nearly every request is valid and
// plain: printable ASCII strings with no escapes, known members only.
// readFast reads such a request straight from its bytes, without the
// structural index and without the bookkeeping that exact errors need:
// each object's members are bits, each value is read where it starts.
//
// At the first thing it does not expect, valid or not (an escape, a byte
// above 0x7E, an unknown member, a value out of range, a missing member),
// it gives up, and the careful parser reads the body from the start. So the
// fast path decides nothing on its own: it accepts only requests that the
// careful parser accepts, and gives them the same canonical form and the
// same counts, through the same number reader, canonical writer and tally.
// TestFastPathAgrees and FuzzFastPath compare the two.

// readFast reads the request in p.data into p.req and p.canon. It reports
// false when the careful parser must read the body instead; p is then
// half-written and must be reset.
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
		var name []byte
		if name, i, ok = memberAt(d, i); !ok {
			return false
		}
		bit := requestMember(name)
		if bit == 0 || seen&bit != 0 {
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
		(seen&memberCostCurrency != 0 || !p.anyCost)
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
		var ok bool
		if i, ok = p.fastCase(d, i, &p.kase); !ok {
			return i, false
		}
		if _, added := p.ids.add(p.kase.id); !added {
			return i, false
		}
		p.addCase(n)
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
		var name []byte
		if name, i, ok = memberAt(d, i); !ok {
			return i, false
		}
		bit := caseMember(name)
		if bit == 0 || seen&bit != 0 {
			return i, false
		}
		seen |= bit
		switch bit {
		case memberCaseID:
			c.id, i, ok = idAt(d, i, MaxIDLength)
		case memberStatus:
			var v []byte
			if v, i, ok = idAt(d, i, len("timeout")); ok {
				c.status, ok = parseStatus(v)
			}
		case memberLatency:
			i, ok = numberAt(d, i, &c.latency, MaxLatencyMS, false)
		case memberRepeatGroup:
			c.repeatGroup, i, ok = idAt(d, i, MaxIDLength)
			c.has |= hasRepeatGroup
		case memberInput:
			i, ok = numberAt(d, i, &c.input, MaxTokens, true)
			c.has |= hasInput
		case memberOutput:
			i, ok = numberAt(d, i, &c.output, MaxTokens, true)
			c.has |= hasOutput
		case memberCost:
			i, ok = numberAt(d, i, &c.cost, MaxCost, false)
			c.has |= hasCost
			p.anyCost = true
		case memberToolChecks:
			i, ok = fastToolChecks(d, i, c)
			c.has |= hasToolChecks
		case memberViolations:
			i, ok = fastViolations(d, i, c)
			c.has |= hasViolations
		case memberTrace:
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

func fastToolChecks(d []byte, i int, c *observation) (int, bool) {
	i, ok := firstElement(d, i)
	for ok {
		if len(c.checks) == MaxToolChecks || i >= len(d) || d[i] != '{' {
			return i, false
		}
		var tc toolCheck
		var seen uint32
		for i, ok = firstMember(d, i+1); ok; {
			var name []byte
			if name, i, ok = memberAt(d, i); !ok {
				return i, false
			}
			bit := toolCheckMember(name)
			if bit == 0 || seen&bit != 0 {
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

func fastViolations(d []byte, i int, c *observation) (int, bool) {
	i, ok := firstElement(d, i)
	for ok {
		if len(c.reported) == MaxViolations {
			return i, false
		}
		var v []byte
		if v, i, ok = idAt(d, i, len("instruction_override")); !ok {
			return i, false
		}
		var code violation
		if code, ok = parseViolation(v); !ok {
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
		var name []byte
		if name, i, ok = memberAt(d, i); !ok {
			return i, false
		}
		bit := traceMember(name)
		if bit == 0 || seen&bit != 0 {
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

// memberAt reads the member name at d[i] ('"') and the ':' after it, and
// returns the name and where the value starts. The name ends at the first
// '"': a name with an escape or a control character is none of the known
// names, which is all the fast path needs to know of it.
func memberAt(d []byte, i int) ([]byte, int, bool) {
	start := i + 1
	j := stringStop(d, start)
	if j >= len(d) || d[j] != '"' {
		return nil, j, false
	}
	k := j + 1
	if k >= len(d) || d[k] != ':' {
		if k = skipWS(d, k); k >= len(d) || d[k] != ':' {
			return nil, k, false
		}
	}
	return d[start:j], skipWS(d, k+1), true
}

// stringStop returns the index of the first '"', '\\' or control
// character at or after i, or len(d).
func stringStop(d []byte, i int) int {
	for ; i+8 <= len(d); i += 8 {
		if m := swar.StringStops(binary.LittleEndian.Uint64(d[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(d) && d[i] != '"' && d[i] != '\\' && d[i] >= ' ' {
		i++
	}
	return i
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

// numberAt reads the number at d[i] into n, and returns where it ends; n
// must be from 0 to max, and an integer if integer is set.
func numberAt(d []byte, i int, n *number, max float64, integer bool) (int, bool) {
	end, bad := scanNumber(d, i, n)
	return end, bad == numberOK && n.within(max, integer)
}

// boolAt reads true or false at d[i].
func boolAt(d []byte, i int) (v bool, end int, ok bool) {
	switch s := string(d[i:min(i+5, len(d))]); {
	case s == "false":
		return false, i + 5, true
	case len(s) >= 4 && s[:4] == "true":
		return true, i + 4, true
	}
	return false, i, false
}
