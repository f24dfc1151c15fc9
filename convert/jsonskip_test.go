package convert

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// skip takes a string's bytes unread where the structural index allows it
// (where jsonindex has SIMD, and in these tests with either builder).
// These tests hold it to the byte-wise skip it replaced (skipRef, kept
// here): the same result, error and offset where the reader stops, on
// documents whose strings cross the index's 64-byte blocks and the
// buffer's refills, however the input is cut into reads.

// skipRef is skip as it was before the index: every string read byte by
// byte by skipStringFrom.
func (j *jsonReader) skipRef() error {
	var stack []byte
	for {
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
				if err := j.skipNameRef(); err != nil {
					return err
				}
			}
			continue
		case '"':
			if err := j.skipStringFrom(j.pos + 1); err != nil {
				return err
			}
		default:
			if err := j.skipScalar(); err != nil {
				return err
			}
		}
		for {
			if len(stack) == 0 {
				return nil
			}
			open := stack[len(stack)-1]
			c := j.peek()
			if c == ',' {
				j.pos++
				if open == '{' {
					if err := j.skipNameRef(); err != nil {
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

func (j *jsonReader) skipNameRef() error {
	if j.peek() != '"' {
		return j.syntaxError()
	}
	if err := j.skipStringFrom(j.pos + 1); err != nil {
		return err
	}
	if j.peek() != ':' {
		return j.syntaxError()
	}
	j.pos++
	return nil
}

// splitReader cuts its input into reads: random lengths of 1 to n bytes
// (from seed), or, when n is 0, at every 64-byte boundary of the input.
type splitReader struct {
	b   []byte
	off int
	n   int
	rng *rand.Rand
}

func newSplitReader(b []byte, n int, seed uint64) *splitReader {
	return &splitReader{b: b, n: n, rng: rand.New(rand.NewPCG(seed, 1))}
}

func (s *splitReader) Read(p []byte) (int, error) {
	if s.off == len(s.b) {
		return 0, io.EOF
	}
	m := 64 - s.off%64
	if s.n > 0 {
		m = 1 + s.rng.IntN(s.n)
	}
	m = min(m, len(p), len(s.b)-s.off)
	copy(p, s.b[s.off:s.off+m])
	s.off += m
	return m, nil
}

// readers are the ways of cutting the input that the tests try; one byte a
// read only for inputs small enough for it to be quick.
func readers(in []byte, seed uint64) map[string]func() io.Reader {
	rs := map[string]func() io.Reader{
		"whole":      func() io.Reader { return bytes.NewReader(in) },
		"64-byte":    func() io.Reader { return newSplitReader(in, 0, 0) },
		"random 1-9": func() io.Reader { return newSplitReader(in, 9, seed) },
		"random 1-100k": func() io.Reader {
			return newSplitReader(in, 100<<10, seed)
		},
	}
	if len(in) <= 1<<18 {
		rs["one byte"] = func() io.Reader { return iotest.OneByteReader(bytes.NewReader(in)) }
	}
	return rs
}

// skipResult skips a document (with skip, or skipRef when ref) and says
// how it went: the error, and the offset where the reader stopped.
func skipResult(r io.Reader, ref bool) (string, int) {
	j := newJSONReader(r, "f")
	j.useIndex = true // whatever the builder
	skip := j.skip
	if ref {
		skip = j.skipRef
	}
	err := skip()
	off := j.offset()
	if err == nil {
		err = j.end()
	}
	return fmt.Sprintf("stopped at %d: %v", off, err), len(j.buf)
}

// walkResult reads a document as a converter does, reading some values and
// skipping others (with skip, or skipRef when ref), and writes what it read
// and where.
func walkResult(r io.Reader, ref bool) string {
	j := newJSONReader(r, "f")
	j.useIndex = true
	skip := j.skip
	if ref {
		skip = j.skipRef
	}
	var b strings.Builder
	count := 0 // which values are skipped: every third
	var walk func(depth int) error
	walk = func(depth int) error {
		fmt.Fprintf(&b, "@%d", j.offset())
		switch j.kind() {
		case '{':
			return j.object(func(name string) error {
				b.WriteString(strconv.Quote(name))
				if count++; count%3 == 0 {
					return skip()
				}
				return walk(depth + 1)
			})
		case '[':
			return j.array(func(i int) error {
				if count++; count%3 == 0 {
					return skip()
				}
				return walk(depth + 1)
			})
		case '"':
			if depth%2 == 0 {
				is, _, err := j.stringIs("tool")
				fmt.Fprint(&b, is)
				return err
			}
			s, _, err := j.str()
			fmt.Fprintf(&b, "%d:%x", len(s), len(s)%251)
			return err
		case '0':
			v, err := j.float()
			b.WriteString(formatFloat(v))
			return err
		}
		return skip()
	}
	err := walk(0)
	if err == nil {
		err = j.end()
	}
	fmt.Fprintf(&b, " stopped at %d: %v", j.offset(), err)
	return b.String()
}

// checkSkip holds skip and a converter's walk to the byte-wise reference
// on in, cut into reads in every way of readers.
func checkSkip(t *testing.T, in []byte, seed uint64) {
	t.Helper()
	for name, r := range readers(in, seed) {
		got, size := skipResult(r(), false)
		if want, _ := skipResult(r(), true); got != want {
			t.Fatalf("skip %s, read %s:\n got %s\nwant %s", describe(in), name, got, want)
		}
		if size != jsonBufSize {
			t.Fatalf("skip %s, read %s: the buffer grew to %d bytes", describe(in), name, size)
		}
		if got, want := walkResult(r(), false), walkResult(r(), true); got != want {
			t.Fatalf("walk %s, read %s:\n got %s\nwant %s", describe(in), name, got, want)
		}
	}
}

// describe names an input too long to print by its length and its start.
func describe(in []byte) string {
	if len(in) > 200 {
		return fmt.Sprintf("%d bytes %.100q…", len(in), in)
	}
	return strconv.Quote(string(in))
}

// textPieces are what long strings are made of; badPieces make a string,
// or the document, invalid.
var (
	textPieces = []string{"plain text ", `\"`, `\\`, `\n`, `\/`, `\u00e9`, `\uD83D\uDE00`, "é", "ünï", "\xff", "\xe2\x82", "  ", "\t", `{"k": [1, 2]}`, `\\\"`}
	badPieces  = []string{`\x`, "\x01", "\n", `\u12`, `\u12G4`, `\`, `"`, "\x00", `\U0041`}
)

// longString writes a string of about n bytes whose piece at (about) byte
// at of the document is one of the given, so that it lands on a block or
// refill boundary: the bytes before it a run of backslashes or text.
func longString(rng *rand.Rand, b *bytes.Buffer, n, at int, bad bool) {
	b.WriteByte('"')
	end := b.Len() + n
	for b.Len() < end {
		if at > b.Len() && at-b.Len() < 40 {
			// Backslash runs, even (so valid) or odd, up to the boundary.
			for range at - b.Len() {
				b.WriteByte('\\')
			}
			if bad && rng.IntN(2) == 0 {
				b.WriteString(badPieces[rng.IntN(len(badPieces))])
			} else {
				b.WriteString(textPieces[rng.IntN(len(textPieces))])
			}
			at = -1
			continue
		}
		if at > b.Len() && rng.IntN(4) == 0 {
			// Fast forward, with the pieces' mix, toward the boundary.
			k := at - b.Len() - 40
			for k > 0 {
				p := textPieces[rng.IntN(4)]
				if len(p) > k {
					p = strings.Repeat("x", k)
				}
				b.WriteString(p)
				k -= len(p)
			}
			continue
		}
		b.WriteString(textPieces[rng.IntN(len(textPieces))])
	}
	b.WriteByte('"')
}

// longDoc writes a document of long strings in arrays and objects, its
// boundaries' pieces placed at 64-byte and 64 KB boundaries, valid or not.
func longDoc(rng *rand.Rand, size int, bad bool) []byte {
	var b bytes.Buffer
	boundary := func() int {
		unit := 64
		if rng.IntN(2) == 0 {
			unit = jsonBufSize
		}
		return (b.Len()/unit+1)*unit + rng.IntN(5) - 2
	}
	ws := func() {
		b.WriteString([]string{"", " ", "\n  ", "\t", "\r\n", strings.Repeat(" ", 70)}[rng.IntN(6)])
	}
	b.WriteString(`{"samples": [`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		ws()
		b.WriteString(`{"id": "s`)
		b.WriteString(strconv.Itoa(i))
		b.WriteString(`", "n": [1.5, -2e3, true, null, NaN], "messages": [`)
		for k := range 1 + rng.IntN(4) {
			if k > 0 {
				b.WriteString(",")
			}
			ws()
			b.WriteString(`{"role": "tool", "content": `)
			n := []int{0, 10, 60, 200, 4000, 70000, 140000}[rng.IntN(7)]
			longString(rng, &b, n, boundary(), bad && rng.IntN(8) == 0)
			ws()
			b.WriteString(`}`)
		}
		b.WriteString(`], "tool": "`)
		b.WriteString(strings.Repeat("ab", rng.IntN(50)))
		b.WriteString(`"}`)
	}
	b.WriteString("]}")
	ws()
	in := b.Bytes()
	if bad && rng.IntN(3) == 0 {
		in = in[:rng.IntN(len(in))] // cut short
	}
	return in
}

// TestJSONSkipAgrees holds skip to the byte-wise reference on long
// documents, valid and not, cut into reads in several ways.
func TestJSONSkipAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 64))
	n := 60
	if testing.Short() {
		n = 10
	}
	for i := range n {
		size := []int{200, 5000, 70000, 300000}[i%4]
		checkSkip(t, longDoc(rng, size, i%2 == 1), uint64(i))
	}
}

// TestJSONSkipBoundaries puts each piece, valid or not, at each offset
// around a block boundary and around the first refill, after a run of
// backslashes that ends there.
func TestJSONSkipBoundaries(t *testing.T) {
	pieces := append(append([]string{}, textPieces...), badPieces...)
	for _, boundary := range []int{128, jsonBufSize} {
		for d := -3; d <= 3; d++ {
			for run := range 4 {
				for _, p := range pieces {
					at := boundary + d
					var b bytes.Buffer
					b.WriteString(`["`)
					b.WriteString(strings.Repeat("y", at-run-b.Len()))
					b.WriteString(strings.Repeat(`\`, run))
					b.WriteString(p)
					b.WriteString(strings.Repeat("z", 100))
					b.WriteString(`", "next"]`)
					in := b.Bytes()
					for name, r := range readers(in, uint64(d+10)) {
						if name == "one byte" && boundary > 128 {
							continue // the others cut at the boundary too, and quicker
						}
						got, _ := skipResult(r(), false)
						if want, _ := skipResult(r(), true); got != want {
							t.Errorf("skip %s, read %s:\n got %s\nwant %s", describe(in), name, got, want)
						}
					}
				}
			}
		}
	}
}

// FuzzJSONSkip holds skip to the byte-wise reference. The fuzzer's input is
// stretched so that its bytes reach the index's boundaries: each '~' is
// stretch bytes of text and each '#' a run of run backslashes.
func FuzzJSONSkip(f *testing.F) {
	for _, s := range []string{
		`["~\"\\\n\u00e9~", {"a": "~#", "b": [1, "~"]}]`,
		`{"a": "~\x~"}`,
		"[\"~\x01\"]",
		`["~#"]`,
		`["~\u12"]`,
		`["~é` + "\xff" + `", "~`,
		`[1, "~"   ,  true]`,
	} {
		f.Add([]byte(s), uint32(70), uint8(3), uint8(1))
		f.Add([]byte(s), uint32(65530), uint8(64), uint8(0))
	}
	f.Fuzz(func(t *testing.T, in []byte, stretch uint32, run, cut uint8) {
		stretch %= 3 * jsonBufSize
		var b bytes.Buffer
		for _, c := range in {
			switch c {
			case '~':
				b.WriteString(strings.Repeat("x", int(stretch)))
			case '#':
				b.WriteString(strings.Repeat(`\`, int(run)))
			default:
				b.WriteByte(c)
			}
		}
		doc := b.Bytes()
		if b.Len() > 1<<20 {
			return
		}
		rs := readers(doc, uint64(cut))
		r := rs[[]string{"whole", "64-byte", "random 1-9", "random 1-100k", "one byte"}[cut%5]]
		if r == nil {
			r = rs["random 1-9"]
		}
		got, _ := skipResult(r(), false)
		if want, _ := skipResult(r(), true); got != want {
			t.Fatalf("skip %s:\n got %s\nwant %s", describe(doc), got, want)
		}
		if got, want := walkResult(r(), false), walkResult(r(), true); got != want {
			t.Fatalf("walk %s:\n got %s\nwant %s", describe(doc), got, want)
		}
	})
}

// BenchmarkJSONSkip skips a 100 KB prompt, of the text the converters
// skip most (escapes, non-ASCII), with skip and with the byte-wise
// reference.
func BenchmarkJSONSkip(b *testing.B) {
	var doc bytes.Buffer
	doc.WriteString(`{"content": "`)
	for doc.Len() < 100<<10 {
		doc.WriteString(`the model called tool_call résumé \"quoted\" line\nbreak tab\t {\"json\": 1} `)
	}
	doc.WriteString(`"}`)
	in := doc.Bytes()
	for _, ref := range []bool{false, true} {
		name := "index"
		if ref {
			name = "bytewise"
		}
		b.Run(name, func(b *testing.B) {
			r := bytes.NewReader(in)
			j := newJSONReader(r, "f")
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				r.Reset(in)
				*j = jsonReader{r: r, buf: j.buf, idx: j.idx, name: "f", useIndex: !ref}
				skip := j.skip
				if ref {
					skip = j.skipRef
				}
				if err := skip(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
