package convert

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/evalmeter/evalmeter/internal/jsonindex"
	"github.com/evalmeter/evalmeter/internal/swar"
)

// jsonReader walks a JSON document as a stream, in a buffer of its own. The
// converters read the few members they need and skip the rest with skip,
// which checks a value's syntax without unescaping or keeping its strings:
// they are most of a log's bytes (messages, events), so skipping them is
// most of convert's time. A skipped string is found by the structural index
// of package jsonindex (SIMD), its bytes taken unread when the index's
// summary says they are valid (see skipString).
//
// Values of an unexpected type are skipped and read as absent: tools add and
// change fields between versions, and a converter reads what it can.
//
// The constants NaN, Infinity and -Infinity, which Python writes, are read
// where a value may stand: NaN as null, the infinities as numbers beyond a
// double's range. Strings may hold invalid UTF-8 (Python writes lone
// surrogates as escapes), and names may repeat: the text is skipped anyway.
type jsonReader struct {
	r        io.Reader
	ahead    *readAhead // r, when it is read ahead
	buf      []byte     // buf[pos:lim] is read and not yet consumed
	pos, lim int
	base     int64 // the input offset of buf[0]
	rerr     error // what ended the input: io.EOF or a read error
	stack    []byte
	name     string // the file, for error messages

	// The structural index of buf[:ilim], made a chunk at a time by
	// skipString where useIndex (jsonindex.Accelerated: the portable
	// builder is slower than skipStringFrom). idx holds the positions of
	// the last chunk (offsets in buf), those before idx[ip] passed, and
	// simple is its Summary.Simple. indexed is false until skipString
	// starts an index, and when the reader has gone past ilim without it.
	useIndex bool
	sc       jsonindex.Scanner
	idx      []uint32
	ip       int
	ilim     int
	simple   bool
	indexed  bool
}

const (
	jsonBufSize = 64 << 10
	// maxJSONDepth bounds the nesting that skip follows, as encoding/json does.
	maxJSONDepth = 10000
	// maxJSONToken bounds a string or number that is read whole, not
	// skipped: identifiers and enums, never free text.
	maxJSONToken = 1 << 20
	// jsonIndexChunk is what skipString indexes at a time: a summary's
	// reach, so that one unusual string sends few others to the byte-wise
	// path.
	jsonIndexChunk = 4096
)

func newJSONReader(r io.Reader, name string) *jsonReader {
	return &jsonReader{r: r, buf: make([]byte, jsonBufSize), name: name, useIndex: jsonindex.Accelerated()}
}

// newJSONReaderAhead reads r ahead, in a goroutine, for an r that does work
// of its own to read (an inflate). Call close when done.
func newJSONReaderAhead(r io.Reader, name string) *jsonReader {
	a := newReadAhead(r)
	j := newJSONReader(a, name)
	j.ahead = a
	return j
}

// openJSON opens the file at path and a reader of it as JSON, the opening
// of a converter that reads a file itself. The caller closes the file.
func openJSON(path string) (*jsonReader, *os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return newJSONReader(f, path), f, nil
}

// openJSONObject opens path as openJSON does, for a format whose document is
// one object: a file whose first value is not an object, or not JSON, is
// errNotFormat (and closed).
func openJSONObject(path string) (*jsonReader, *os.File, error) {
	j, f, err := openJSON(path)
	if err == nil && j.kind() != '{' {
		f.Close()
		return nil, nil, errNotFormat
	}
	return j, f, err
}

// close stops reading ahead, if the reader does, so that r may be closed.
func (j *jsonReader) close() {
	if j.ahead != nil {
		j.ahead.close()
	}
}

// fill reads more input after buf[lim], keeping buf[pos:lim] (moved to the
// front of the buffer, so pos becomes 0). It reports whether more came. A
// value is kept whole only up to maxJSONToken; fill grows the buffer for it.
func (j *jsonReader) fill() bool {
	if j.rerr != nil {
		return false
	}
	if j.pos > 0 {
		j.shiftIndex(j.pos)
		j.lim = copy(j.buf, j.buf[j.pos:j.lim])
		j.base += int64(j.pos)
		j.pos = 0
	}
	if j.lim == len(j.buf) {
		if len(j.buf) > maxJSONToken {
			j.rerr = fmt.Errorf("a value at byte %d is over %d bytes long: not an identifier, a number or an enum", j.base, maxJSONToken)
			return false
		}
		j.buf = append(j.buf, make([]byte, len(j.buf))...)
	}
	for {
		n, err := j.r.Read(j.buf[j.lim:])
		j.lim += n
		if err != nil {
			j.rerr = err
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
}

// ensure makes at least n bytes available at pos, unless the input ends first.
func (j *jsonReader) ensure(n int) {
	for j.lim-j.pos < n && j.fill() {
	}
}

// peek skips white space and returns the next byte, without consuming it,
// or 0 at the end of the input (or for a NUL: pos < lim tells them apart).
func (j *jsonReader) peek() byte {
	for {
		for i := j.pos; i < j.lim; i++ {
			if c := j.buf[i]; c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
				j.pos = i
				return c
			}
		}
		j.pos = j.lim
		if !j.fill() {
			return 0
		}
	}
}

// kind is the kind of the next value: '{', '[', '"', '0' (a number), 't',
// 'f' or 'n', or 0 when no value comes; reading it then reports why.
func (j *jsonReader) kind() byte {
	switch c := j.peek(); c {
	case '{', '[', '"', 't', 'f', 'n':
		return c
	case 'N':
		return 'n'
	case 'I', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return '0'
	}
	return 0
}

// object calls member for each member of the object that comes next. member
// must read or skip the value. A value that is not an object is skipped.
func (j *jsonReader) object(member func(name string) error) error {
	if j.kind() != '{' {
		return j.skip()
	}
	j.pos++
	if j.peek() == '}' {
		j.pos++
		return nil
	}
	for {
		if j.peek() != '"' {
			return j.syntaxError()
		}
		name, err := j.readString()
		if err != nil {
			return err
		}
		if j.peek() != ':' {
			return j.syntaxError()
		}
		j.pos++
		if err := member(name); err != nil {
			return err
		}
		switch j.peek() {
		case ',':
			j.pos++
		case '}':
			j.pos++
			return nil
		default:
			return j.syntaxError()
		}
	}
}

// array calls elem for each element of the array that comes next. elem must
// read or skip the value. A value that is not an array is skipped.
func (j *jsonReader) array(elem func(i int) error) error {
	if j.kind() != '[' {
		return j.skip()
	}
	j.pos++
	if j.peek() == ']' {
		j.pos++
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		switch j.peek() {
		case ',':
			j.pos++
		case ']':
			j.pos++
			return nil
		default:
			return j.syntaxError()
		}
	}
}

// skip skips the next value, checking its syntax. It follows nesting with a
// stack of its own, not by recursion.
func (j *jsonReader) skip() error {
	stack := j.stack[:0]
	defer func() { j.stack = stack[:0] }()
	for {
		// A value.
		switch c := j.peek(); c {
		case '{', '[':
			if len(stack) == maxJSONDepth {
				return fmt.Errorf("%s: malformed JSON: nested deeper than %d at byte %d", j.name, maxJSONDepth, j.offset())
			}
			stack = append(stack, c)
			j.pos++
			c = j.peek()
			if (c == '}' && stack[len(stack)-1] == '{') || (c == ']' && stack[len(stack)-1] == '[') {
				j.pos++
				stack = stack[:len(stack)-1]
				break
			}
			if stack[len(stack)-1] == '{' {
				if err := j.skipName(); err != nil {
					return err
				}
			}
			continue
		case '"':
			if err := j.skipString(); err != nil {
				return err
			}
		default:
			if err := j.skipScalar(); err != nil {
				return err
			}
		}
		// After a value: close what it ends, then go on to the next value.
		for {
			if len(stack) == 0 {
				return nil
			}
			open := stack[len(stack)-1]
			c := j.peek()
			if c == ',' {
				j.pos++
				if open == '{' {
					if err := j.skipName(); err != nil {
						return err
					}
				}
				break
			}
			if (c == '}' && open == '{') || (c == ']' && open == '[') {
				j.pos++
				stack = stack[:len(stack)-1]
				continue
			}
			return j.syntaxError()
		}
	}
}

// skipName skips a member's name and the ':' after it.
func (j *jsonReader) skipName() error {
	if j.peek() != '"' {
		return j.syntaxError()
	}
	if err := j.skipString(); err != nil {
		return err
	}
	if j.peek() != ':' {
		return j.syntaxError()
	}
	j.pos++
	return nil
}

// skipScalar skips a number or a literal.
func (j *jsonReader) skipScalar() error {
	if _, ok, err := j.literal(); ok || err != nil {
		return err
	}
	_, err := j.numberText()
	return err
}

// literal consumes true, false, null, NaN, Infinity or -Infinity, when one
// comes next, and returns its text.
func (j *jsonReader) literal() (string, bool, error) {
	j.ensure(len("-Infinity"))
	rest := j.buf[j.pos:j.lim]
	for _, lit := range [...]string{"true", "false", "null", "NaN", "Infinity", "-Infinity"} {
		if len(rest) >= len(lit) && string(rest[:len(lit)]) == lit {
			j.pos += len(lit)
			return lit, true, nil
		}
	}
	if len(rest) == 0 || (rest[0] >= 'a' && rest[0] <= 'z') || (rest[0] >= 'A' && rest[0] <= 'Z') {
		for _, lit := range [...]string{"true", "false", "null", "NaN", "Infinity"} {
			if len(rest) < len(lit) && string(rest) == lit[:len(rest)] {
				j.pos = j.lim // cut short: the input ends
			}
		}
		return "", false, j.syntaxError()
	}
	return "", false, nil
}

// numberText consumes a number and returns its text, a slice of the buffer
// valid until the next read.
func (j *jsonReader) numberText() ([]byte, error) {
	i := 0
	for {
		for ; j.pos+i < j.lim; i++ {
			switch j.buf[j.pos+i] {
			case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '-', '+', '.', 'e', 'E':
				continue
			}
			goto done
		}
		if !j.fill() {
			if errors.Is(j.rerr, io.EOF) {
				break
			}
			return nil, j.syntaxError()
		}
	}
done:
	text := j.buf[j.pos : j.pos+i]
	n := jsonNumberLen(text)
	switch {
	case n == 0 && j.pos+i == j.lim && jsonNumberLen(append(text[:i:i], '0')) == i+1:
		j.pos = j.lim // a number cut short: the input ends
		return nil, j.syntaxError()
	case n == 0:
		return nil, j.syntaxError()
	}
	// What follows the number, if anything, is for the caller to judge.
	j.pos += n
	return text[:n], nil
}

// jsonNumberLen is the length of the JSON number that b starts with, 0 if none.
func jsonNumberLen(b []byte) int {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return 0
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return 0
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0
		}
	}
	return i
}

// skipString consumes the string at pos, streaming: it keeps none of it.
// The index has the string's opening quote and the next position after
// it, before which the last byte but white space is the closing quote.
// Where the chunk indexed is Simple, its strings are valid JSON, and the
// bytes are taken unread; from a chunk that is not, skipStringFrom reads
// them, and reports the errors. A string that runs past the chunk is taken
// a chunk at a time, so that the buffer holds at most a block of it.
func (j *jsonReader) skipString() error {
	if !j.useIndex || !j.seek(j.pos) {
		return j.skipStringFrom(j.pos + 1)
	}
	j.ip++         // the opening quote
	i := j.pos + 1 // the bytes before i are checked; i is not escaped
	for j.ip == len(j.idx) {
		// The string, or the white space after it, runs past the chunk.
		if !j.simple {
			return j.skipStringFrom(i)
		}
		rest := j.buf[i:j.ilim]
		if c := lastNonSpace(rest); c >= 0 && rest[c] == '"' && trailingBackslashes(rest[:c])%2 == 0 {
			j.pos = i + c + 1 // closed, and white space follows
			return nil
		}
		// Open: an escape that the chunk cuts is read with the next one.
		if !j.indexMore(j.ilim - trailingBackslashes(rest)%2) {
			return j.skipStringFrom(j.pos)
		}
		i = j.pos
	}
	rest := j.buf[i:j.idx[j.ip]]
	c := lastNonSpace(rest)
	if !j.simple || c < 0 || rest[c] != '"' {
		return j.skipStringFrom(i)
	}
	j.pos = i + c + 1
	return nil
}

// seek makes the index's next position q, the opening quote at pos,
// indexing from q when the index does not reach it. It reports false when
// it cannot: the input ends before a block of it.
func (j *jsonReader) seek(q int) bool {
	fresh := !j.indexed || q > j.ilim
	if fresh {
		j.startIndex(q)
	}
	for {
		for j.ip < len(j.idx) && int(j.idx[j.ip]) < q {
			j.ip++
		}
		switch {
		case j.ip < len(j.idx) && int(j.idx[j.ip]) == q:
			return true
		case j.ip < len(j.idx) || q < j.ilim:
			// Not a string to the index: it cannot be, but if so, the
			// index starts again from here.
			if fresh {
				return false
			}
			j.startIndex(q)
			fresh = true
			continue
		}
		if !j.indexMore(q) {
			return false
		}
		q = j.pos
	}
}

// startIndex starts an index at buf[q], outside strings.
func (j *jsonReader) startIndex(q int) {
	j.sc = jsonindex.Scanner{}
	j.idx, j.ip = j.idx[:0], 0
	j.ilim, j.simple, j.indexed = q, true, true
}

// indexMore indexes the next chunk, once every position of the last one is
// passed, from pos = i on (i <= ilim), reading more when less than a block
// is left: the buffer may move, and pos with it. It reports false when the
// input ends first.
func (j *jsonReader) indexMore(i int) bool {
	j.pos = i
	for j.lim-j.ilim < 64 {
		if !j.fill() {
			return false
		}
	}
	n := min(j.lim-j.ilim, jsonIndexChunk) &^ 63
	var sum jsonindex.Summary
	j.idx, sum = j.sc.Scan(j.idx[:0], j.buf[j.ilim:j.ilim+n], uint32(j.ilim))
	j.ip = 0
	j.ilim += n
	j.simple = sum.Simple
	return true
}

// shiftIndex moves the index with the buffer, whose bytes from n on move
// to its front; an index that the reader has gone past is dropped.
func (j *jsonReader) shiftIndex(n int) {
	if !j.indexed {
		return
	}
	if n > j.ilim {
		j.indexed = false
		return
	}
	for j.ip < len(j.idx) && int(j.idx[j.ip]) < n {
		j.ip++
	}
	j.idx = j.idx[:copy(j.idx, j.idx[j.ip:])]
	for k := range j.idx {
		j.idx[k] -= uint32(n)
	}
	j.ip = 0
	j.ilim -= n
}

// lastNonSpace returns the index of b's last byte that is not white
// space, or -1.
func lastNonSpace(b []byte) int {
	i := len(b) - 1
	for i >= 0 && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i--
	}
	return i
}

// trailingBackslashes returns the length of the run of backslashes that
// ends b.
func trailingBackslashes(b []byte) int {
	n := 0
	for n < len(b) && b[len(b)-1-n] == '\\' {
		n++
	}
	return n
}

// skipStringFrom consumes the rest of a string, from buf[i] on, byte by
// byte, checking it: i is inside the string, and not inside an escape.
func (j *jsonReader) skipStringFrom(i int) error {
	for {
		buf, lim := j.buf, j.lim
		for i < lim {
			if i+8 <= lim {
				m := swar.StringStops(binary.LittleEndian.Uint64(buf[i:]))
				if m == 0 {
					i += 8
					continue
				}
				i += bits.TrailingZeros64(m) / 8
			} else if c := buf[i]; c != '"' && c != '\\' && c >= 0x20 {
				i++
				continue
			}
			switch {
			case buf[i] == '"':
				j.pos = i + 1
				return nil
			case buf[i] == '\\' && i+1 < lim && isShortEscape(buf[i+1]):
				i += 2 // the common case, without a call
				continue
			case buf[i] == '\\':
				j.pos = i
				n, err := j.escapeLen(0)
				if err != nil {
					return err
				}
				i = j.pos + n
				buf, lim = j.buf, j.lim // escapeLen may have read more
				continue
			}
			j.pos = i
			return j.syntaxError() // a control character
		}
		j.pos = i
		if !j.fill() {
			return j.syntaxError()
		}
		i = j.pos
	}
}

// isShortEscape reports whether c, after a backslash, makes an escape of two bytes.
func isShortEscape(c byte) bool {
	switch c {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return true
	}
	return false
}

// skipEscape consumes the escape at pos.
func (j *jsonReader) skipEscape() error {
	n, err := j.escapeLen(0)
	j.pos += n
	return err
}

// escapeLen checks the escape at pos+k and returns its length.
func (j *jsonReader) escapeLen(k int) (int, error) {
	j.ensure(k + 6)
	e := j.buf[j.pos+k : j.lim]
	fail := func(at int) (int, error) {
		j.pos += k + at
		return 0, j.syntaxError()
	}
	if len(e) < 2 {
		return fail(len(e))
	}
	if isShortEscape(e[1]) {
		return 2, nil
	}
	if e[1] == 'u' {
		for m := 2; m < 6; m++ {
			if m == len(e) {
				return fail(m)
			}
			if !isHex(e[m]) {
				return fail(0)
			}
		}
		return 6, nil
	}
	return fail(1)
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// readString consumes the string at pos and returns it unescaped. Invalid
// UTF-8 comes out as U+FFFD.
func (j *jsonReader) readString() (string, error) {
	raw, err := j.rawString()
	if err != nil {
		return "", err
	}
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			// The syntax is checked: what AppendUnquote reports is invalid UTF-8.
			out, _ := jsontext.AppendUnquote(nil, raw)
			return string(out), nil
		}
	}
	return string(raw[1 : len(raw)-1]), nil
}

// rawString consumes the string at pos and returns it as written, quotes
// included: a slice of the buffer, valid until the next read.
func (j *jsonReader) rawString() ([]byte, error) {
	k := 1 // the next byte to look at is buf[pos+k]: pos moves when the buffer fills
	for {
		for j.pos+k < j.lim {
			switch c := j.buf[j.pos+k]; {
			case c == '"':
				raw := j.buf[j.pos : j.pos+k+1]
				j.pos += k + 1
				return raw, nil
			case c == '\\':
				n, err := j.escapeLen(k)
				if err != nil {
					return nil, err
				}
				k += n
			case c < 0x20:
				j.pos += k
				return nil, j.syntaxError()
			default:
				k++
			}
		}
		if !j.fill() {
			j.pos = j.lim
			return nil, j.syntaxError()
		}
	}
}

// float consumes a number: ±Inf for one beyond a double's range and for
// the infinities.
func (j *jsonReader) float() (float64, error) {
	if lit, ok, err := j.literal(); ok || err != nil {
		switch lit {
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		return 0, j.syntaxError()
	}
	text, err := j.numberText()
	if err != nil {
		return 0, err
	}
	v, _ := strconv.ParseFloat(string(text), 64) // the syntax is checked: only ErrRange, with ±Inf
	return v, nil
}

// number reads a number; ok is false when the value is not one, or is
// beyond a double's range.
func (j *jsonReader) number() (v float64, ok bool, err error) {
	if j.kind() != '0' {
		return 0, false, j.skip()
	}
	v, err = j.float()
	if err != nil || math.IsInf(v, 0) {
		return 0, false, err
	}
	return v, true, nil
}

// str reads a string; ok is false when the value is not one. Call it only
// for identifiers and enums, never for free text.
func (j *jsonReader) str() (v string, ok bool, err error) {
	if j.kind() != '"' {
		return "", false, j.skip()
	}
	v, err = j.readString()
	return v, err == nil, err
}

// stringIs reads a string and reports whether it is lit (written plain),
// without keeping it: it may be free text. ok is false when the value is
// not a string.
func (j *jsonReader) stringIs(lit string) (is, ok bool, err error) {
	if j.kind() != '"' {
		return false, false, j.skip()
	}
	j.ensure(len(lit) + 2)
	rest := j.buf[j.pos:j.lim]
	is = len(rest) >= len(lit)+2 && rest[len(lit)+1] == '"' && string(rest[1:len(lit)+1]) == lit
	return is, true, j.skipString()
}

// shortNumberString reads a string and returns the number it spells, nil
// when it spells none: a string of more than 32 bytes is skipped unread, as
// it cannot be a number's text and may be free text.
func (j *jsonReader) shortNumberString() (*float64, error) {
	if j.kind() != '"' {
		return nil, j.skip()
	}
	j.ensure(34)
	rest := j.buf[j.pos:j.lim]
	end := bytes.IndexByte(rest[1:min(len(rest), 34)], '"')
	if end < 0 || bytes.IndexByte(rest[1:end+1], '\\') >= 0 {
		return nil, j.skipString()
	}
	text := string(rest[1 : end+1])
	j.pos += end + 2
	v, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil {
		return nil, nil
	}
	return &v, nil
}

// id reads an identifier written as a string or a number (the number's text).
func (j *jsonReader) id() (v string, ok bool, err error) {
	switch j.kind() {
	case '"':
		return j.str()
	case '0':
		if _, lit, err := j.literal(); lit || err != nil {
			return "", false, err // an infinity
		}
		text, err := j.numberText()
		if err != nil {
			return "", false, err
		}
		return string(text), true, nil
	}
	return "", false, j.skip()
}

// boolean reads true or false; ok is false when the value is neither.
func (j *jsonReader) boolean() (v, ok bool, err error) {
	switch j.kind() {
	case 't', 'f':
		lit, _, err := j.literal()
		if err != nil {
			return false, false, err
		}
		return lit == "true", true, nil
	}
	return false, false, j.skip()
}

// isNull reports whether the next value is null (or NaN), and consumes it if so.
func (j *jsonReader) isNull() (bool, error) {
	if j.kind() != 'n' {
		return false, nil
	}
	return true, j.skip()
}

// end checks that nothing but white space follows the document.
func (j *jsonReader) end() error {
	if j.peek(); j.pos < j.lim { // not peek() != 0: the data may be a NUL
		return fmt.Errorf("%s: malformed JSON: data after the end of the document (at byte %d)", j.name, j.offset())
	}
	if !errors.Is(j.rerr, io.EOF) {
		return fmt.Errorf("%s: %w", j.name, j.rerr)
	}
	return nil
}

// offset is the input offset of pos.
func (j *jsonReader) offset() int64 { return j.base + int64(j.pos) }

// syntaxError describes the error at pos by its place, never by the content
// around it: at the end of the input, the file is truncated.
func (j *jsonReader) syntaxError() error {
	switch {
	case j.rerr != nil && !errors.Is(j.rerr, io.EOF):
		return fmt.Errorf("%s: %w", j.name, j.rerr) // what kept the rest from being read
	case j.pos == j.lim && j.rerr != nil:
		return fmt.Errorf("%s: the JSON ends early: the file is truncated", j.name)
	}
	return fmt.Errorf("%s: malformed JSON at byte %d", j.name, j.offset())
}
