package metrics

import (
	"fmt"
	"strconv"
)

// The canonical form (RFC 8785, JCS) of a valid request. Members are written
// in the order RFC 8785 sorts them; every name is ASCII, so that order is
// plain byte order, fixed here by hand. Every string of a valid request is an
// identifier or an enum, which JSON writes without escapes.

// appendCase appends the canonical form of a valid case read from body.
func appendCase(dst, body []byte, c *observation) []byte {
	dst = append(dst, '{')
	if c.has&hasViolations != 0 {
		dst = append(dst, `"boundary_violations":[`...)
		for j, v := range c.reported {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendShort(dst, violationJSON[v.index()])
		}
		dst = append(dst, "],"...)
	}
	dst = append(dst, `"case_id":`...)
	dst = appendPlain(dst, c.id)
	if c.has&hasCost != 0 {
		dst = append(dst, `,"cost":`...)
		dst = appendNumber(dst, body, &c.cost)
	}
	if c.has&hasInput != 0 {
		dst = append(dst, `,"input_tokens":`...)
		dst = appendNumber(dst, body, &c.input)
	}
	dst = append(dst, `,"latency_ms":`...)
	dst = appendNumber(dst, body, &c.latency)
	if c.has&hasOutput != 0 {
		dst = append(dst, `,"output_tokens":`...)
		dst = appendNumber(dst, body, &c.output)
	}
	if c.has&hasRepeatGroup != 0 {
		dst = append(dst, `,"repeat_group":`...)
		dst = appendPlain(dst, c.repeatGroup)
	}
	dst = appendShort(dst, statusJSON[c.status])
	if c.has&hasToolChecks != 0 {
		dst = append(dst, `,"tool_checks":[`...)
		for j, tc := range c.checks {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"name":"`...)
			dst = appendShort(dst, tc.name)
			dst = appendShort(dst, passedJSON[b2i(tc.passed)])
		}
		dst = append(dst, ']')
	}
	if c.has&hasTrace != 0 {
		dst = append(dst, `,"trace":{"expected_steps":`...)
		dst = appendNumber(dst, body, &c.expected)
		dst = append(dst, `,"observed_steps":`...)
		dst = appendNumber(dst, body, &c.observed)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// The pieces of a case's canonical form that depend on an enum, each held
// where appendShort can copy it whole. Choosing a piece by index spares a
// branch on the value, which comes in no set pattern.
var (
	statusJSON    = pieces(len(statusNames), func(k int) string { return `,"status":"` + statusNames[k] + `"` })
	violationJSON = pieces(len(violationNames), func(k int) string { return `"` + violationNames[k] + `"` })
	passedJSON    = pieces(2, func(k int) string { return `","passed":` + strconv.FormatBool(k == 1) + `}` })
)

// pieces returns piece(k) for k from 0 to n-1, each with room for
// appendShort's whole copy.
func pieces(n int, piece func(k int) string) [][]byte {
	ps := make([][]byte, n)
	for k := range ps {
		p := piece(k)
		if len(p) > shortCopy {
			panic(fmt.Sprintf("metrics: %q is longer than appendShort copies", p))
		}
		ps[k] = append(make([]byte, 0, shortCopy), p...)
	}
	return ps
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// shortCopy is how many bytes appendShort copies at once.
const shortCopy = 32

// appendShort appends s. A case is written in pieces of a few bytes to a
// few dozen, and runtime.memmove costs a call and a branch on the size for
// each, more than the copy itself: so where s is at most shortCopy bytes,
// and both s's and dst's capacity reach that far, it copies shortCopy
// bytes at once, and dst then ends after s's own.
func appendShort(dst, s []byte) []byte {
	n := len(dst)
	if len(s) <= shortCopy && cap(s) >= shortCopy && cap(dst)-n >= shortCopy {
		// Through a variable: assigning one array pointer's target to
		// another's costs a call to memmove, which must allow for overlap.
		piece := *(*[shortCopy]byte)(s[:shortCopy])
		*(*[shortCopy]byte)(dst[n : n+shortCopy]) = piece
		return dst[:n+len(s)]
	}
	return append(dst, s...)
}

// appendTrailer appends what follows the cases: the end of the array and
// the request's own members.
func (r *Request) appendTrailer(dst []byte) []byte {
	dst = append(dst, ']')
	if r.costCurrency != nil {
		dst = append(dst, `,"cost_currency":`...)
		dst = appendPlain(dst, r.costCurrency)
	}
	dst = append(dst, `,"run_id":`...)
	dst = appendPlain(dst, r.runID)
	return append(dst, '}')
}

// appendPlain appends a string that needs no escapes (validID, an enum).
func appendPlain(dst, s []byte) []byte {
	dst = append(dst, '"')
	dst = appendShort(dst, s)
	return append(dst, '"')
}
