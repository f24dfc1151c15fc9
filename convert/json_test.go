package convert

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// The reader is checked against go-json-experiment's jsontext, which it
// replaced for speed: over the same text, with the non-finite constants
// rewritten into JSON first, both must accept the same documents and read
// the same values from them, whatever the chunks the input comes in.

func TestJSONReaderCases(t *testing.T) {
	tests := []struct{ in, want string }{
		{`[NaN, Infinity, -Infinity, -1, 2]`, `[null 1e999 -1e999 -1 2]`},
		{`{"a": "NaN Infinity -Infinity \"NaN\" \\", "b": NaN}`, `{"a":"NaN Infinity -Infinity \"NaN\" \\" "b":null}`},
		{`{"a": Nope}`, `error: malformed JSON at byte 6`},
		{`-`, `error: the JSON ends early: the file is truncated`},
		{`["x\\\"NaN\"y", NaN]`, `["x\\\"NaN\"y" null]`},
		{`["\u0022 NaN\ud800", -Infinity, 1e400, 0.5e-3]`, `["\" NaN` + "\ufffd" + `" -1e999 1e999 0.0005]`},
		{`{"a":{"b":[[],{}]},"a":true}`, `{"a":{"b":[[] {}]} "a":true}`},
		{`[1,]`, `error: malformed JSON at byte 3`},
		{`[01]`, `error: malformed JSON at byte 2`},
		{`["a` + "\x01" + `"]`, `error: malformed JSON at byte 3`},
		{`["\x"]`, `error: malformed JSON at byte 3`},
		{`["\u12"]`, `error: malformed JSON at byte 2`},
		{`[tru`, `error: the JSON ends early: the file is truncated`},
		{`[1.`, `error: the JSON ends early: the file is truncated`},
		{`[1] [2]`, `error: malformed JSON: data after the end of the document (at byte 4)`},
		{"0\x00", `error: malformed JSON: data after the end of the document (at byte 1)`},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 2, 3, 1000} {
			if got := readAll(&chunkedReader{r: strings.NewReader(tt.in), n: size}, size == 2); got != tt.want {
				t.Errorf("read %.40q by %d:\n got %s\nwant %s", tt.in, size, got, tt.want)
			}
		}
	}
}

func TestJSONReaderDepth(t *testing.T) {
	for _, tt := range []struct {
		depth int
		want  string
	}{
		{maxJSONDepth, "f: the JSON ends early: the file is truncated"},
		{maxJSONDepth + 1, "f: malformed JSON: nested deeper than 10000 at byte 10000"},
	} {
		j := newJSONReader(strings.NewReader(strings.Repeat("[", tt.depth)), "f")
		err := j.skip()
		j.close()
		if err == nil || err.Error() != tt.want {
			t.Errorf("skip %d [: %v; want %s", tt.depth, err, tt.want)
		}
	}
}

// TestJSONReaderAgrees compares the reader with jsontext on random
// documents, valid and mutated.
func TestJSONReaderAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		var b strings.Builder
		randomJSON(rng, &b, 0)
		in := []byte(b.String())
		for range rng.IntN(3) { // mutate: most mutants are invalid
			at := rng.IntN(len(in) + 1)
			c := `{}[]",:\ ntNI-0.e5u` + "\x01\xff"
			ins := c[rng.IntN(len(c))]
			switch rng.IntN(3) {
			case 0:
				in = append(in[:at:at], append([]byte{ins}, in[at:]...)...)
			case 1:
				if at < len(in) {
					in = append(in[:at:at], in[at+1:]...)
				}
			case 2:
				if at < len(in) {
					in[at] = ins
				}
			}
		}
		checkJSONReader(t, in, 1+rng.IntN(9))
	}
}

func FuzzJSONReader(f *testing.F) {
	for _, s := range []string{`{"a":[1,-2.5e3,"x\u00e9\n",true,false,null,NaN,-Infinity,{}]}`, `["\ud800"`, `[1,2`} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		checkJSONReader(t, in, 1+int(chunk%16))
	})
}

func checkJSONReader(t *testing.T, in []byte, chunk int) {
	t.Helper()
	rewritten, ok := rewriteNonFinite(string(in))
	if !ok {
		return // the rewrite would join a constant to a number: no oracle
	}
	want := readAllJSONText(rewritten)
	// The reader both reads (object, str, number...) and skips: check both.
	got := readAll(&chunkedReader{r: strings.NewReader(string(in)), n: chunk}, chunk%2 == 0)
	// Which mistake in a document is named first, and where, may differ:
	// both must refuse it, though.
	if strings.HasPrefix(got, "error") && strings.HasPrefix(want, "error") {
		got, want = "error", "error"
	}
	if got != want {
		t.Fatalf("read %q in chunks of %d:\n got %s\nwant %s", in, chunk, got, want)
	}
	j := newJSONReader(&chunkedReader{r: strings.NewReader(string(in)), n: chunk}, "f")
	defer j.close()
	err := j.skip()
	if err == nil {
		err = j.end()
	}
	if wantOK := !strings.HasPrefix(want, "error"); (err == nil) != wantOK {
		t.Fatalf("skip %q in chunks of %d: %v; jsontext: %s", in, chunk, err, want)
	}
}

// readAll reads a document with the reader's typed calls and writes what it
// read: one value per token, numbers as floats, errors by their kind.
func readAll(r io.Reader, ahead bool) string {
	j := newJSONReader(r, "f")
	if ahead {
		j = newJSONReaderAhead(r, "f")
	}
	defer j.close()
	var b strings.Builder
	err := readValue(j, &b)
	if err == nil {
		err = j.end()
	}
	if err != nil {
		msg := err.Error()
		return "error: " + msg[strings.Index(msg, ": ")+2:]
	}
	return b.String()
}

func readValue(j *jsonReader, b *strings.Builder) error {
	switch j.kind() {
	case '{':
		b.WriteByte('{')
		n := 0
		err := j.object(func(name string) error {
			if n++; n > 1 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.Quote(name) + ":")
			return readValue(j, b)
		})
		b.WriteByte('}')
		return err
	case '[':
		b.WriteByte('[')
		err := j.array(func(i int) error {
			if i > 0 {
				b.WriteByte(' ')
			}
			return readValue(j, b)
		})
		b.WriteByte(']')
		return err
	case '"':
		s, _, err := j.str()
		b.WriteString(strconv.Quote(s))
		return err
	case '0':
		v, err := j.float()
		b.WriteString(formatFloat(v))
		return err
	case 't', 'f':
		v, _, err := j.boolean()
		b.WriteString(strconv.FormatBool(v))
		return err
	case 'n':
		_, err := j.isNull()
		b.WriteString("null")
		return err
	}
	return j.skip()
}

func formatFloat(v float64) string {
	switch {
	case v > 1e308:
		return "1e999"
	case v < -1e308:
		return "-1e999"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// readAllJSONText is readAll done with jsontext.
func readAllJSONText(in string) string {
	d := jsontext.NewDecoder(strings.NewReader(in), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	var b strings.Builder
	var open []jsontext.Kind
	n := []int{0}
	for {
		if len(open) == 0 && n[0] > 0 {
			if rest := strings.TrimLeft(in[d.InputOffset():], " \t\r\n"); rest != "" {
				return fmt.Sprintf("error: malformed JSON: data after the end of the document (at byte %d)", len(in)-len(rest))
			}
			return b.String()
		}
		tok, err := d.ReadToken()
		if err != nil {
			var se *jsontext.SyntacticError
			switch {
			case errors.Is(err, io.ErrUnexpectedEOF), err == io.EOF:
				return "error: the JSON ends early: the file is truncated"
			case errors.As(err, &se):
				return fmt.Sprintf("error: malformed JSON at byte %d", se.ByteOffset)
			}
			return "error: " + err.Error()
		}
		k := tok.Kind()
		if k == '}' || k == ']' {
			b.WriteByte(byte(k))
			open, n = open[:len(open)-1], n[:len(n)-1]
			n[len(n)-1]++
			continue
		}
		inObject := len(open) > 0 && open[len(open)-1] == '{'
		count := n[len(n)-1]
		switch {
		case inObject && count%2 == 1:
			// a value after its name
		case count > 0:
			b.WriteByte(' ')
		}
		switch k {
		case '{', '[':
			b.WriteByte(byte(k))
			open, n = append(open, k), append(n, 0)
			continue
		case '"':
			b.WriteString(strconv.Quote(tok.String()))
			if inObject && count%2 == 0 {
				b.WriteByte(':')
			}
		case '0':
			v, _ := tok.Float()
			b.WriteString(formatFloat(v))
		case 't', 'f':
			b.WriteString(strconv.FormatBool(tok.Bool()))
		case 'n':
			b.WriteString("null")
		}
		n[len(n)-1]++
	}
}

// rewriteNonFinite rewrites NaN, Infinity and -Infinity outside strings
// into JSON (null and numbers beyond a double's range), as the converters
// read them. ok is false when a constant is next to a number's byte (the
// rewrite would join them into another number) or cut short at the end.
func rewriteNonFinite(s string) (out string, ok bool) {
	var b strings.Builder
	inString, escaped := false, false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case len(s[i:]) < 9 && s[i:] != "-" && (strings.HasPrefix("NaN", s[i:]) || strings.HasPrefix("Infinity", s[i:]) || strings.HasPrefix("-Infinity", s[i:])):
			return "", false // a constant cut short, which jsontext takes for another mistake
		case strings.HasPrefix(s[i:], "NaN"), strings.HasPrefix(s[i:], "Infinity"), strings.HasPrefix(s[i:], "-Infinity"):
			if i > 0 && strings.IndexByte("0123456789.eE+-", s[i-1]) >= 0 {
				return "", false
			}
			lit := map[byte]string{'N': "null", 'I': "1e999", '-': "-1e999"}[c]
			b.WriteString(lit)
			i += map[byte]int{'N': 3, 'I': 8, '-': 9}[c]
			if i < len(s) && strings.IndexByte("0123456789.eE+-", s[i]) >= 0 {
				return "", false
			}
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String(), true
}

// randomJSON writes a random value of the shapes and bytes that matter to
// the reader: nesting, escapes, numbers and the constants.
func randomJSON(rng *rand.Rand, b *strings.Builder, depth int) {
	ws := func() {
		if rng.IntN(4) == 0 {
			b.WriteString([]string{" ", "\n", "\t ", "\r\n"}[rng.IntN(4)])
		}
	}
	ws()
	switch k := rng.IntN(10); {
	case k == 0 && depth < 4:
		b.WriteByte('{')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			randomString(rng, b)
			ws()
			b.WriteByte(':')
			randomJSON(rng, b, depth+1)
		}
		b.WriteByte('}')
	case k == 1 && depth < 4:
		b.WriteByte('[')
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			randomJSON(rng, b, depth+1)
		}
		b.WriteByte(']')
	case k <= 4:
		randomString(rng, b)
	case k <= 7:
		b.WriteString([]string{"0", "-0", "12", "-3.25", "1e400", "1E-5", "0.000001", "123456789012345678901234567890", "2.5e+3"}[rng.IntN(9)])
	default:
		b.WriteString([]string{"true", "false", "null", "NaN", "Infinity", "-Infinity"}[rng.IntN(6)])
	}
	ws()
}

func randomString(rng *rand.Rand, b *strings.Builder) {
	pieces := []string{"a", "plain text ", `\"`, `\\`, `\n`, `\u00e9`, `\ud83d\ude00`, `\ud800`, "é", "\xff", "NaN", "12345678", "/"}
	b.WriteByte('"')
	for range rng.IntN(6) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	b.WriteByte('"')
}

// chunkedReader reads at most n bytes at a time.
type chunkedReader struct {
	r io.Reader
	n int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// TestJSONReaderLongValues: free text of any length is skipped in a
// bounded buffer; a value read whole (an identifier) is bounded.
func TestJSONReaderLongValues(t *testing.T) {
	long := `"` + strings.Repeat(`ab\n`, maxJSONToken/2) + `"`
	j := newJSONReader(strings.NewReader(`[`+long+`, 1]`), "f")
	if err := j.skip(); err != nil {
		t.Fatalf("skip a %d-byte string: %v", len(long), err)
	}
	if len(j.buf) != jsonBufSize {
		t.Errorf("skipping a %d-byte string grew the buffer to %d bytes", len(long), len(j.buf))
	}
	got := readAll(strings.NewReader(`{"id": `+long+`}`), false)
	if want := "error: a value at byte 7 is over 1048576 bytes long"; !strings.HasPrefix(got, want) {
		t.Errorf("read a %d-byte identifier: %s; want %s…", len(long), got, want)
	}
}
