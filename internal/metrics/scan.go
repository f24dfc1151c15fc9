package metrics

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unicode/utf8"

	"github.com/evalmeter/evalmeter/api"

	"github.com/evalmeter/evalmeter/internal/jsonindex"
	"github.com/evalmeter/evalmeter/internal/swar"
)

// The JSON syntax under the parser: I-JSON (RFC 7493) read in place, with
// no tokens and no copies of strings that have no escapes.
//
// The parser walks the structural positions that package jsonindex finds
// in the body, a window at a time (docs/design.md §5.1): p.pos is always
// the next position, so white space costs nothing, and a string in a
// window whose strings are plain ends before the next position, so its
// bytes are not read. Numbers, literals and the strings of other windows
// are read byte by byte, and the grammar is checked token by token: the
// index validates nothing.

// maxDepth bounds nesting, as encoding/json does, so that unknown members
// cannot exhaust the stack.
const maxDepth = 10000

// window is how much of the body is indexed at a time: its positions fit
// in a buffer of the parser's that is small and reused, whatever the body.
const window = 4096

// cursor walks the structural positions of the body. Where the index is
// not built with SIMD (jsonindex.Accelerated), building it costs more than
// it saves, and the cursor walks the bytes instead: the same steps, white
// space skipped byte by byte, and every string read.
type cursor struct {
	scanner  jsonindex.Scanner
	idx      []uint32 // the positions of the window being walked, then endOfWindow
	cur      int      // idx[cur] is p.pos
	indexed  int      // data[:indexed] is indexed
	last     bool     // the window is the body's last
	plain    bool     // the window's strings are plain (jsonindex.Summary)
	bytewise bool     // no index: idx is endOfWindow alone, cur -1
	mark     int      // without an index, p.pos before step overwrote it
}

// endOfWindow follows a window's positions: no offset of a body under
// 4 GiB is as large, so step tells it from a position with no bounds of
// its own.
const endOfWindow = math.MaxUint32

// start indexes the first window and moves to its first position.
func (p *parser) start() {
	p.bytewise = !jsonindex.Accelerated()
	size := 1
	if !p.bytewise {
		// A window has at most a position a byte, and the last is padded
		// to a whole block.
		size = min(window, len(p.data)) + 64 + 1
	}
	p.idx = append(slices.Grow(p.idx[:0], size), endOfWindow)
	p.cur = -1
	if p.bytewise {
		p.skipSpace()
		return
	}
	p.step()
}

// step moves p.pos to the next position, or to the end of the body. It
// is small enough to be inlined, which matters: it runs for every token.
func (p *parser) step() {
	p.cur++
	if p.pos = int(p.idx[p.cur]); p.pos == endOfWindow {
		p.stepWindow()
	}
}

func (p *parser) stepWindow() {
	if p.bytewise {
		p.cur = -1
		p.pos = p.mark + 1 // past the structural character
		p.skipSpace()
		return
	}
	for p.nextWindow() {
		if p.idx[0] != endOfWindow {
			p.pos = int(p.idx[0])
			return
		}
	}
	// The end of the body: step comes back here.
	p.idx = append(p.idx[:0], endOfWindow)
	p.cur = -1
	p.pos = len(p.data)
}

// skipSpace moves p.pos past white space, where there is no index.
func (p *parser) skipSpace() {
	const space = 1<<' ' | 1<<'\t' | 1<<'\n' | 1<<'\r'
	d, i := p.data, p.pos
	for i < len(d) && d[i] <= ' ' && space>>d[i]&1 != 0 {
		i++
	}
	p.pos, p.mark = i, i
}

// nextWindow indexes the next window of the body, if any is left.
func (p *parser) nextWindow() bool {
	if p.last {
		return false
	}
	from := p.indexed
	var sum jsonindex.Summary
	if to := from + window; to < len(p.data) {
		p.idx, sum = p.scanner.Scan(p.idx[:0], p.data[from:to], uint32(from))
		p.indexed = to
	} else {
		// An unterminated string is for readString to report, where it
		// reports one in the bytes it reads.
		p.idx, sum, _ = p.scanner.Last(p.idx[:0], p.data[from:], uint32(from))
		p.indexed = len(p.data)
		p.last = true
	}
	p.idx = append(p.idx, endOfWindow)
	p.cur = 0
	p.plain = sum.Plain
	return true
}

// seek moves p.pos to the first position at or after offset at, after a
// string read byte by byte: no position lies inside a string, and only
// white space between its closing quote and the next one.
func (p *parser) seek(at int) {
	if p.bytewise {
		p.pos = at
		p.skipSpace()
		return
	}
	for {
		for int(p.idx[p.cur]) < at {
			p.cur++
		}
		if p.idx[p.cur] != endOfWindow {
			p.pos = int(p.idx[p.cur])
			return
		}
		if !p.nextWindow() {
			p.stepWindow() // to the end of the body
			return
		}
	}
}

// endScalar moves on from a number or a literal read up to end. A byte
// that is not white space there, where no position is, cannot follow a
// value: p.pos stays on it, for the caller to report.
func (p *parser) endScalar(end int) {
	if p.bytewise {
		p.pos = end
		p.skipSpace()
		return
	}
	p.step()
	if end < p.pos && !isSpace(p.data[end]) {
		p.pos = end
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *parser) peek() byte {
	if p.pos < len(p.data) {
		return p.data[p.pos]
	}
	return 0
}

// Objects are read as
//
//	more, err := p.beginObject()
//	for more {
//		name, at, err := p.memberName()
//		... read the value ...
//		more, err = p.nextMember()
//	}
//
// and arrays alike with beginArray and nextElement.

// beginObject consumes '{' and reports whether a member follows.
func (p *parser) beginObject() (more bool, err error) {
	return p.begin('}')
}

// memberName reads a member's name and the ':' after it, leaving p.pos at
// the value. at is where the name starts, for error messages.
func (p *parser) memberName() (name []byte, at int, err error) {
	if p.peek() != '"' {
		return nil, 0, p.syntaxError("expected a member name in double quotes")
	}
	at = p.pos
	if name, err = p.readString(); err != nil {
		return nil, 0, err
	}
	if p.peek() != ':' {
		return nil, 0, p.syntaxError("expected ':' after a member name")
	}
	p.step()
	return name, at, nil
}

// nextMember consumes the ',' or '}' after a member's value and reports
// whether another member follows.
func (p *parser) nextMember() (more bool, err error) {
	return p.next('}', "expected ',' or '}' after an object member")
}

// beginArray consumes '[' and reports whether an element follows.
func (p *parser) beginArray() (more bool, err error) {
	return p.begin(']')
}

// nextElement consumes the ',' or ']' after an element and reports whether
// another element follows.
func (p *parser) nextElement() (more bool, err error) {
	return p.next(']', "expected ',' or ']' after an array element")
}

func (p *parser) begin(end byte) (bool, error) {
	p.depth++
	if p.depth > maxDepth {
		return false, p.syntaxError(fmt.Sprintf("nesting deeper than %d levels", maxDepth))
	}
	p.step()
	if p.peek() == end {
		p.step()
		p.depth--
		return false, nil
	}
	return true, nil
}

func (p *parser) next(end byte, msg string) (bool, error) {
	switch p.peek() {
	case ',':
		p.step()
		return true, nil
	case end:
		p.step()
		p.depth--
		return false, nil
	}
	return false, p.syntaxError(msg)
}

// names detects duplicate member names in one object.
type names struct {
	known  uint32          // bits of the object's known names read so far
	few    [8][]byte       // the first other names, compared one by one
	nFew   int             // names in few
	others map[string]bool // other names after those
}

// add records a name: bit is its bit among the object's known names, or 0.
// A name read twice makes the body malformed (RFC 7493 §2.3).
func (n *names) add(p *parser, bit uint32, at int, name []byte) error {
	if bit != 0 {
		if n.known&bit != 0 {
			return p.duplicateName(at, name)
		}
		n.known |= bit
		return nil
	}
	// Most objects are small: a map for each would be most of the cost of
	// skipping them.
	for _, other := range n.few[:n.nFew] {
		if string(other) == string(name) {
			return p.duplicateName(at, name)
		}
	}
	if n.nFew < len(n.few) {
		n.few[n.nFew] = name
		n.nFew++
		return nil
	}
	if n.others[string(name)] {
		return p.duplicateName(at, name)
	}
	if n.others == nil {
		n.others = make(map[string]bool)
	}
	n.others[string(name)] = true
	return nil
}

// skip reads any value, checking only that it is I-JSON.
func (p *parser) skip() error {
	switch c := p.peek(); {
	case c == '{':
		var seen names
		more, err := p.beginObject()
		for more {
			name, at, err := p.memberName()
			if err != nil {
				return err
			}
			if err := seen.add(p, 0, at, name); err != nil {
				return err
			}
			if err := p.skip(); err != nil {
				return err
			}
			if more, err = p.nextMember(); err != nil {
				return err
			}
		}
		return err
	case c == '[':
		more, err := p.beginArray()
		for more {
			if err := p.skip(); err != nil {
				return err
			}
			if more, err = p.nextElement(); err != nil {
				return err
			}
		}
		return err
	case c == '"':
		_, err := p.readString()
		return err
	case c == '-' || isDigit(c):
		var n number
		return p.readNumber(&n)
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case p.pos >= len(p.data):
		return p.syntaxError("unexpected end of the body")
	default:
		return p.syntaxError(fmt.Sprintf("unexpected character %q", c))
	}
}

func (p *parser) literal(lit string) error {
	if len(p.data)-p.pos < len(lit) || string(p.data[p.pos:p.pos+len(lit)]) != lit {
		return p.syntaxError("invalid literal; expected " + lit)
	}
	p.endScalar(p.pos + len(lit))
	return nil
}

// readString reads the string at p.pos. The value is a slice of the body
// when the string has no escapes, a new slice otherwise.
//
// In a plain window, the string ends at the last quote before the next
// position, and nothing in it needs checking. Elsewhere plain ASCII runs
// are scanned 8 bytes at a time.
func (p *parser) readString() ([]byte, error) {
	if next := p.idx[p.cur+1]; p.plain && next != endOfWindow {
		end := int(next) - 1
		for p.data[end] != '"' { // white space after the closing quote
			end--
		}
		s := p.data[p.pos+1 : end]
		p.cur++
		p.pos = int(next)
		return s, nil
	}
	return p.readStringBytes()
}

// readStringBytes is readString where the index cannot tell where the
// string ends.
func (p *parser) readStringBytes() ([]byte, error) {
	d := p.data
	start := p.pos + 1
	i := start
	for ; i+8 <= len(d); i += 8 {
		if m := stops(binary.LittleEndian.Uint64(d[i:])); m != 0 {
			i += bits.TrailingZeros64(m) / 8
			if d[i] == '"' {
				p.seek(i + 1)
				return d[start:i], nil
			}
			return p.readStringSlow(start, i)
		}
	}
	return p.readStringSlow(start, i)
}

// stops marks with its high bit each byte of w (8 bytes, little-endian) that
// ends a plain run of a string: '"', '\\', a control character or a byte of
// non-ASCII UTF-8. The lowest mark is always exact.
func stops(w uint64) uint64 { return swar.StringStops(w) | swar.NonASCII(w) }

// readStringSlow reads the rest of the string that starts at start from
// d[i] on, one byte at a time: escapes, non-ASCII and the last bytes of the body.
func (p *parser) readStringSlow(start, i int) ([]byte, error) {
	d := p.data
	var out []byte // nil while the value is still d[start:i]
	for i < len(d) {
		switch c := d[i]; {
		case c == '"':
			p.seek(i + 1)
			if out == nil {
				return d[start:i], nil
			}
			return out, nil
		case c == '\\':
			if out == nil {
				out = append(make([]byte, 0, i-start+16), d[start:i]...)
			}
			r, n, err := p.escape(i)
			if err != nil {
				return nil, err
			}
			out = utf8.AppendRune(out, r)
			i += n
		case c < 0x20:
			return nil, p.syntaxErrorAt(i, "control character in a string; escape it")
		case c < utf8.RuneSelf:
			if out != nil {
				out = append(out, c)
			}
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, p.syntaxErrorAt(i, "invalid UTF-8 in a string")
			}
			if out != nil {
				out = append(out, d[i:i+size]...)
			}
			i += size
		}
	}
	return nil, p.syntaxErrorAt(len(d), "unterminated string")
}

// escape decodes the escape sequence at d[i] ('\\'), returning the rune and
// the bytes it took. A surrogate must come as a valid pair (RFC 7493 §2.1).
func (p *parser) escape(i int) (rune, int, error) {
	d := p.data
	if i+1 >= len(d) {
		return 0, 0, p.syntaxErrorAt(i, "unterminated escape sequence")
	}
	switch d[i+1] {
	case '"', '\\', '/':
		return rune(d[i+1]), 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		r, ok := hex4(d[i+2:])
		if !ok {
			return 0, 0, p.syntaxErrorAt(i, `invalid \u escape; expected four hex digits`)
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return 0, 0, p.syntaxErrorAt(i, "lone low surrogate in a \\u escape")
		case r >= 0xD800 && r <= 0xDBFF:
			if len(d) < i+12 || d[i+6] != '\\' || d[i+7] != 'u' {
				return 0, 0, p.syntaxErrorAt(i, "lone high surrogate in a \\u escape")
			}
			lo, ok := hex4(d[i+8:])
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return 0, 0, p.syntaxErrorAt(i, "lone high surrogate in a \\u escape")
			}
			return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, nil
		}
		return r, 6, nil
	}
	return 0, 0, p.syntaxErrorAt(i, "invalid escape sequence")
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func (p *parser) duplicateName(at int, name []byte) error {
	return p.syntaxErrorAt(at, fmt.Sprintf("duplicate member name %q (RFC 7493 forbids it)", name))
}

func (p *parser) syntaxError(msg string) error { return p.syntaxErrorAt(p.pos, msg) }

func (p *parser) syntaxErrorAt(at int, msg string) error {
	return &api.Error{Code: api.CodeMalformedJSON, Message: fmt.Sprintf("malformed JSON at byte %d: %s", at, msg)}
}
