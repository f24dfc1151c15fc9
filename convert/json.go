package convert

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// jsonReader walks a JSON document as a stream. The converters read the few
// members they need and skip the rest with skip, which checks a value's syntax
// without unescaping or keeping its strings.
//
// Values of an unexpected type are skipped and read as absent: tools add and
// change fields between versions, and a converter reads what it can.
type jsonReader struct {
	d    *jsontext.Decoder
	name string // the file, for error messages
}

func newJSONReader(r io.Reader, name string) *jsonReader {
	return &jsonReader{
		d: jsontext.NewDecoder(newNonFiniteReader(r),
			// Python writes lone surrogates as escapes; the text is skipped anyway.
			jsontext.AllowInvalidUTF8(true),
			// Tracking names costs memory on big objects, and the tools write none twice.
			jsontext.AllowDuplicateNames(true),
		),
		name: name,
	}
}

// kind is the kind of the next value: '{', '[', '"', '0', 't', 'f' or 'n'.
func (j *jsonReader) kind() jsontext.Kind { return j.d.PeekKind() }

// object calls member for each member of the object that comes next. member
// must read or skip the value. A value that is not an object is skipped.
func (j *jsonReader) object(member func(name string) error) error {
	if j.kind() != jsontext.KindBeginObject {
		return j.skip()
	}
	if _, err := j.d.ReadToken(); err != nil {
		return j.fail(err)
	}
	for j.kind() != jsontext.KindEndObject {
		tok, err := j.d.ReadToken()
		if err != nil {
			return j.fail(err)
		}
		if err := member(tok.String()); err != nil {
			return err
		}
	}
	if _, err := j.d.ReadToken(); err != nil {
		return j.fail(err)
	}
	return nil
}

// array calls elem for each element of the array that comes next. elem must
// read or skip the value. A value that is not an array is skipped.
func (j *jsonReader) array(elem func(i int) error) error {
	if j.kind() != jsontext.KindBeginArray {
		return j.skip()
	}
	if _, err := j.d.ReadToken(); err != nil {
		return j.fail(err)
	}
	for i := 0; j.kind() != jsontext.KindEndArray; i++ {
		if err := elem(i); err != nil {
			return err
		}
	}
	if _, err := j.d.ReadToken(); err != nil {
		return j.fail(err)
	}
	return nil
}

// skip skips the next value.
func (j *jsonReader) skip() error {
	if err := j.d.SkipValue(); err != nil {
		return j.fail(err)
	}
	return nil
}

// number reads a number; ok is false when the value is not one.
func (j *jsonReader) number() (v float64, ok bool, err error) {
	if j.kind() != jsontext.KindNumber {
		return 0, false, j.skip()
	}
	tok, err := j.d.ReadToken()
	if err != nil {
		return 0, false, j.fail(err)
	}
	v, err = tok.Float()
	if err != nil { // out of range of a double: not a usable number
		return 0, false, nil
	}
	return v, true, nil
}

// str reads a string; ok is false when the value is not one. Call it only
// for identifiers and enums, never for free text.
func (j *jsonReader) str() (v string, ok bool, err error) {
	if j.kind() != jsontext.KindString {
		return "", false, j.skip()
	}
	tok, err := j.d.ReadToken()
	if err != nil {
		return "", false, j.fail(err)
	}
	return tok.String(), true, nil
}

// id reads an identifier written as a string or a number (the number's text).
func (j *jsonReader) id() (v string, ok bool, err error) {
	switch j.kind() {
	case jsontext.KindString:
		return j.str()
	case jsontext.KindNumber:
		val, err := j.d.ReadValue()
		if err != nil {
			return "", false, j.fail(err)
		}
		return string(val), true, nil
	}
	return "", false, j.skip()
}

// boolean reads true or false; ok is false when the value is neither.
func (j *jsonReader) boolean() (v, ok bool, err error) {
	switch j.kind() {
	case jsontext.KindTrue, jsontext.KindFalse:
		tok, err := j.d.ReadToken()
		if err != nil {
			return false, false, j.fail(err)
		}
		return tok.Bool(), true, nil
	}
	return false, false, j.skip()
}

// isNull reports whether the next value is null, and consumes it if so.
func (j *jsonReader) isNull() (bool, error) {
	if j.kind() != jsontext.KindNull {
		return false, nil
	}
	return true, j.skip()
}

// end checks that nothing but white space follows the document.
func (j *jsonReader) end() error {
	if _, err := j.d.ReadToken(); err != io.EOF {
		if err == nil {
			return fmt.Errorf("%s: malformed JSON: data after the end of the document (at byte %d)", j.name, j.d.InputOffset())
		}
		return j.fail(err)
	}
	return nil
}

// fail describes a read error by its place, never by the content around it.
func (j *jsonReader) fail(err error) error {
	var se *jsontext.SyntacticError
	switch {
	// jsontext wraps an early end in a SyntacticError: test for it first.
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Errorf("%s: the JSON ends early: the file is truncated", j.name)
	case errors.As(err, &se):
		return fmt.Errorf("%s: malformed JSON at byte %d", j.name, se.ByteOffset)
	}
	return fmt.Errorf("%s: %w", j.name, err)
}

// nonFiniteReader rewrites the constants NaN, Infinity and -Infinity, which
// Python writes outside strings, into JSON: NaN becomes null and the
// infinities numbers beyond a double's range. Other bytes pass unchanged.
type nonFiniteReader struct {
	r        *bufio.Reader
	inString bool
	escaped  bool
	pending  []byte
}

func newNonFiniteReader(r io.Reader) *nonFiniteReader {
	return &nonFiniteReader{r: bufio.NewReaderSize(r, 64<<10)}
}

var nonFiniteLiterals = []struct{ text, json string }{
	{"NaN", "null"},
	{"Infinity", "1e999   "},
	{"-Infinity", "-1e999   "},
}

func (n *nonFiniteReader) Read(p []byte) (int, error) {
	if len(n.pending) > 0 {
		c := copy(p, n.pending)
		n.pending = n.pending[c:]
		return c, nil
	}
	if len(p) == 0 {
		return 0, nil
	}
	if _, err := n.r.Peek(1); err != nil {
		return 0, err
	}
	buf, _ := n.r.Peek(n.r.Buffered())
	if len(buf) > len(p) {
		buf = buf[:len(p)]
	}
	k := n.scan(buf)
	if k > 0 {
		copy(p, buf[:k])
		n.r.Discard(k)
		return k, nil
	}
	for _, lit := range nonFiniteLiterals {
		if b, _ := n.r.Peek(len(lit.text)); string(b) == lit.text {
			n.r.Discard(len(lit.text))
			c := copy(p, lit.json)
			n.pending = []byte(lit.json[c:])
			return c, nil
		}
	}
	// Not buf[0]: a Peek above that filled the buffer may have moved it.
	c, err := n.r.ReadByte()
	if err != nil {
		return 0, err
	}
	p[0] = c
	return 1, nil
}

// scan tracks strings through buf and returns where a constant may start
// outside a string, or len(buf).
//
// Inside a string it jumps from one quote or backslash to the next with
// bytes.IndexByte: strings (messages, events) are most of a log's bytes,
// and a byte-by-byte scan of them was half of convert's time.
func (n *nonFiniteReader) scan(buf []byte) int {
	for i := 0; i < len(buf); {
		if n.inString {
			i = n.skipString(buf, i)
			continue
		}
		switch buf[i] {
		case '"':
			n.inString = true
		case 'N', 'I':
			return i
		case '-':
			if i+1 == len(buf) || buf[i+1] == 'I' {
				return i
			}
		}
		i++
	}
	return len(buf)
}

// skipString advances through the string that buf[i:] is inside of, to just
// after its closing quote, or to len(buf) when it goes on past buf, keeping
// n.escaped for a backslash that ends buf.
func (n *nonFiniteReader) skipString(buf []byte, i int) int {
	if n.escaped {
		n.escaped = false
		i++ // the escaped byte
	}
	quote := -1 // the next quote at or after i, -1: none in buf
	if q := bytes.IndexByte(buf[i:], '"'); q >= 0 {
		quote = i + q
	}
	for {
		end := len(buf)
		if quote >= 0 {
			end = quote
		}
		b := bytes.IndexByte(buf[i:end], '\\')
		if b < 0 {
			if quote < 0 {
				return len(buf)
			}
			n.inString = false
			return quote + 1
		}
		i += b + 2 // the backslash and the byte it escapes
		if i > len(buf) {
			n.escaped = true // the escaped byte comes with the next read
			return len(buf)
		}
		if quote >= 0 && i > quote {
			// The escape took the quote: find the next one.
			quote = -1
			if q := bytes.IndexByte(buf[i:], '"'); q >= 0 {
				quote = i + q
			}
		}
	}
}
