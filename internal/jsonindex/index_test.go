package jsonindex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// reference is the oracle: the contract of the package comment and of
// Summary, one byte at a time.
func reference(buf []byte) ([]uint32, Summary, error) {
	var out []uint32
	sum := Summary{Plain: true, Simple: true}
	inString, escapeNext, inScalar := false, false, false
	for i, c := range buf {
		escaped := escapeNext
		escapeNext = c == '\\' && !escaped
		quote := c == '"' && !escaped
		if escaped && strings.IndexByte(`"\/bfnrt`, c) < 0 {
			sum.Simple = false
		}
		switch {
		case inString:
			if c == '\\' || c < 0x20 || c >= 0x80 {
				sum.Plain = false
			}
			if c < 0x20 {
				sum.Simple = false
			}
			inString = !quote
		case quote:
			out = append(out, uint32(i))
			inString, inScalar = true, false
		case strings.IndexByte("{}[]:,", c) >= 0:
			out = append(out, uint32(i))
			inScalar = false
		case strings.IndexByte(" \t\n\r", c) >= 0:
			inScalar = false
		default:
			if !inScalar {
				out = append(out, uint32(i))
			}
			inScalar = true
		}
	}
	if escapeNext {
		sum.Simple = false // an escape cut short
	}
	if inString {
		return out, sum, &UnterminatedError{Offset: int(out[len(out)-1])}
	}
	return out, sum, nil
}

type builder struct {
	name     string
	portable bool
}

// builders are those this machine runs: the portable one, and the AVX2 one
// where the CPU has its features and the build is not purego.
func builders(t testing.TB) []builder {
	bs := []builder{{"go", true}}
	if useAVX2 {
		bs = append(bs, builder{"avx2", false})
	} else {
		t.Log("the AVX2 builder is not tested: not in this build, or the CPU lacks AVX2, PCLMULQDQ or BMI1")
	}
	return bs
}

// index is Index with the builder b.
func (b builder) index(dst []uint32, buf []byte) ([]uint32, Summary, error) {
	s := Scanner{portable: b.portable}
	return s.Last(dst, buf, 0)
}

// check compares every builder with the reference on buf, scanned whole
// and in two parts split at each block boundary.
func check(t testing.TB, buf []byte) {
	t.Helper()
	want, wantSum, wantErr := reference(buf)
	for _, b := range builders(t) {
		// A non-empty dst: positions are appended after what it holds.
		got, sum, err := b.index([]uint32{7}, buf)
		if got[0] != 7 {
			t.Fatalf("%s: %q: dst[0] overwritten", b.name, buf)
		}
		if !slices.Equal(got[1:], want) {
			t.Fatalf("%s: %q:\n got %v\nwant %v", b.name, buf, got[1:], want)
		}
		if !reflect.DeepEqual(err, wantErr) {
			t.Fatalf("%s: %q: error %v, want %v", b.name, buf, err, wantErr)
		}
		if sum != wantSum {
			t.Fatalf("%s: %q: summary %+v, want %+v", b.name, buf, sum, wantSum)
		}
		for _, split := range splits(len(buf)) {
			s := Scanner{portable: b.portable}
			got, sum1 := s.Scan(nil, buf[:split], 0)
			got, sum2, err := s.Last(got, buf[split:], uint32(split))
			sum := Summary{Plain: sum1.Plain && sum2.Plain, Simple: sum1.Simple && sum2.Simple}
			if !slices.Equal(got, want) || !reflect.DeepEqual(err, wantErr) || sum != wantSum {
				t.Fatalf("%s: %q split at %d:\n got %v %+v %v\nwant %v %+v %v", b.name, buf, split, got, sum, err, want, wantSum, wantErr)
			}
		}
	}
}

// splits are the block boundaries at which check splits an input of n
// bytes: all of them in a short input, some in a long one.
func splits(n int) []int {
	var at []int
	for split := 64; split < n; split += 64 {
		if n <= 1024 || split <= 256 || split >= n-256 || split == n/2&^63 {
			at = append(at, split)
		}
	}
	return at
}

func TestCases(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []uint32 // nil: only compared with the reference
		err  error
	}{
		{in: ``, want: []uint32{}},
		{in: `   `, want: []uint32{}},
		{in: `{}`, want: []uint32{0, 1}},
		{in: `{"a":1}`, want: []uint32{0, 1, 4, 5, 6}},
		{in: `{"a" : [1, 2.5e-3,true,false , null]}`, want: []uint32{0, 1, 5, 7, 8, 9, 11, 17, 18, 22, 23, 29, 31, 35, 36}},
		{in: `"a\"b"`, want: []uint32{0}},
		{in: `"a\\"b"`, want: []uint32{0, 5, 6}, err: &UnterminatedError{Offset: 6}},
		{in: `"a\\\"b"`, want: []uint32{0}},
		{in: `"{[:,]}" ,`, want: []uint32{0, 9}},
		{in: `"\u00e9 é ☃ 😀" 1`, want: []uint32{0, 21}},
		{in: "\"\xff\xfe\x00\x1f\" \x80x", want: []uint32{0, 7}},
		{in: "\x00 \x01", want: []uint32{0, 2}},
		{in: `"a"b`, want: []uint32{0, 3}},
		{in: `\"a"`, want: []uint32{0, 3}, err: &UnterminatedError{Offset: 3}}, // an escaped quote opens nothing
		{in: `"abc`, want: []uint32{0}, err: &UnterminatedError{Offset: 0}},
		{in: `"abc\"`, want: []uint32{0}, err: &UnterminatedError{Offset: 0}},
		{in: `"abc\`, want: []uint32{0}, err: &UnterminatedError{Offset: 0}},
		{in: "1 \t\n\r 2", want: []uint32{0, 6}},
		{in: `[[[[{}]]]]`, want: []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{in: `-0.1e+5,`, want: []uint32{0, 7}},
	} {
		got, _, err := builder{"go", true}.index(nil, []byte(tc.in))
		if tc.want != nil && !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		}
		if !reflect.DeepEqual(err, tc.err) {
			t.Errorf("%q: error %v, want %v", tc.in, err, tc.err)
		}
		check(t, []byte(tc.in))
	}
}

func TestUnterminatedErrorIs(t *testing.T) {
	_, err := Index(nil, []byte(`{"a`))
	var u *UnterminatedError
	if !errors.As(err, &u) || u.Offset != 1 {
		t.Fatalf("Index: %v, want an *UnterminatedError at 1", err)
	}
}

// TestBlockEdges puts runs and multi-byte characters across every 64-byte
// boundary, in and out of strings, on inputs of every length around one
// and two blocks.
func TestBlockEdges(t *testing.T) {
	pieces := []string{`"`, `\`, `\"`, `\\"`, `é`, "\xe2\x98", "\xff", `1`, `true`, ` `, `{`, `:`, `,`}
	for _, n := range []int{1, 2, 62, 63, 64, 65, 66, 126, 127, 128, 129, 130, 191, 192, 193} {
		for _, fill := range []byte{'a', ' ', '"', '\\', ','} {
			for _, p := range pieces {
				for at := max(0, n-70); at < n; at++ {
					buf := bytes.Repeat([]byte{fill}, n)
					copy(buf[at:], p)
					check(t, buf)
					check(t, append([]byte{'"'}, buf...)) // the same inside a string
				}
			}
		}
	}
}

// TestBackslashRuns puts runs of 1 to 70 backslashes, before a quote and
// before a letter, at every offset of three blocks, so that each run ends
// and straddles every boundary, inside and outside strings.
func TestBackslashRuns(t *testing.T) {
	for run := 1; run <= 70; run++ {
		for at := 0; at < 192; at++ {
			for _, after := range []string{`"`, `a`, `""`} {
				for _, prefix := range []string{``, `"`} {
					buf := []byte(prefix + strings.Repeat(" ", at) + strings.Repeat(`\`, run) + after + ` "x" 1`)
					check(t, buf)
				}
			}
		}
	}
}

// TestLengths checks inputs of every length to three blocks, of a JSON
// text cut there and of one padded with spaces.
func TestLengths(t *testing.T) {
	doc := []byte(`{"a\\":[1,-2.5e3,"x\"y",true,false,null,{"é":"\u00e9"}],"b":{"c":[]}, "d" : "` + strings.Repeat(`\\`, 40) + `"}`)
	for n := 0; n <= 3*64+1; n++ {
		check(t, doc[:min(n, len(doc))])
		check(t, append(bytes.Repeat([]byte{' '}, n), '1'))
	}
}

// TestVectors checks the metrics engine's test vectors, its fuzz corpus
// and the converters' fixtures.
func TestVectors(t *testing.T) {
	raw, err := os.ReadFile("../metrics/testdata/metrics-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct {
			Name string `json:"name"`
			Body string `json:"body"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 100 {
		t.Fatalf("only %d vectors", len(file.Vectors))
	}
	check(t, raw)
	for _, v := range file.Vectors {
		check(t, []byte(v.Body))
	}
	for _, in := range fuzzCorpus(t, "../metrics/testdata/fuzz/FuzzCompute") {
		check(t, in)
	}
	fixtures := 0
	err = filepath.WalkDir("../../convert/testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(filepath.Base(path), ".json") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		check(t, b)
		fixtures++
		return nil
	})
	if err != nil || fixtures == 0 {
		t.Fatalf("converter fixtures: %d read, %v", fixtures, err)
	}
	t.Logf("%d vectors, %d converter fixtures", len(file.Vectors), fixtures)
}

// fuzzCorpus reads the []byte arguments of a Go fuzz corpus directory.
func fuzzCorpus(t *testing.T, dir string) [][]byte {
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if lit, ok := strings.CutPrefix(line, "[]byte("); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				out = append(out, []byte(s))
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no corpus entries in %s", dir)
	}
	return out
}

// TestChoice checks that Index uses the builder the CPU allows, and says
// which.
func TestChoice(t *testing.T) {
	buf := []byte(`{"a":["b\\",1]}`)
	got, err := Index(nil, buf)
	want, _, _ := reference(buf)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Index: %v %v, want %v", got, err, want)
	}
	t.Logf("Index uses the AVX2 builder: %v", useAVX2)
}

// TestReuse checks that a previous result's memory can be reused.
func TestReuse(t *testing.T) {
	a, err := Index(nil, []byte(strings.Repeat(`{"a":[1,2]},`, 1000)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Index(a[:0], []byte(`[1]`))
	if err != nil || !slices.Equal(b, []uint32{0, 1, 2}) {
		t.Fatalf("%v %v", b, err)
	}
}

// FuzzIndex compares every builder with the reference, on the input
// alone and behind a prefix that moves it across the block boundary.
func FuzzIndex(f *testing.F) {
	for _, s := range []string{``, `{"a":"b\\\"c","d":[1,2,{"e":null}]}`, strings.Repeat(`\`, 65) + `"`, "\"\xff\xc3\" 1 é"} {
		f.Add(uint8(0), []byte(s))
	}
	f.Fuzz(func(t *testing.T, shift uint8, buf []byte) {
		check(t, buf)
		check(t, append(bytes.Repeat([]byte{'\\'}, int(shift%64)), buf...))
	})
}

// TestCarryLayout checks the offsets of carry's fields that the assembly
// adds to in memory (richOffset and unusualOffset in _asm/gen.go).
func TestCarryLayout(t *testing.T) {
	var c carry
	if r, u := unsafe.Offsetof(c.rich), unsafe.Offsetof(c.unusual); r != 24 || u != 32 {
		t.Fatalf("carry.rich at %d, carry.unusual at %d: change _asm/gen.go's offsets to match and run make generate-asm", r, u)
	}
}

// TestSwitch runs this test binary again with GODEBUG=cpu.avx2=off, as
// one would to rule the assembly out, and checks that the portable builder
// is then chosen, and the AVX2 one otherwise where the build and the CPU
// allow it.
func TestSwitch(t *testing.T) {
	if os.Getenv("JSONINDEX_REPORT_CHOICE") != "" {
		fmt.Printf("useAVX2=%v\n", Accelerated())
		return
	}
	choice := func(godebug string) string {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestSwitch$")
		cmd.Env = append(os.Environ(), "JSONINDEX_REPORT_CHOICE=1", "GODEBUG="+godebug)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GODEBUG=%s: %v\n%s", godebug, err, out)
		}
		for line := range strings.Lines(string(out)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "useAVX2="); ok {
				return v
			}
		}
		t.Fatalf("GODEBUG=%s: no choice reported:\n%s", godebug, out)
		return ""
	}
	if got := choice("cpu.avx2=off"); got != "false" {
		t.Errorf("with GODEBUG=cpu.avx2=off, useAVX2 = %s, want false", got)
	}
	want := strconv.FormatBool(useAVX2)
	if got := choice(""); got != want {
		t.Errorf("useAVX2 = %s in a new process, %s here", got, want)
	}
	t.Logf("this build and CPU take the AVX2 builder: %v", useAVX2)
}

// TestVEXOnly fails on a legacy SSE instruction in the AVX2 builder: one
// on an X register while the Y registers' upper halves are in use costs a
// merge with those halves on Intel CPUs, and two MOVQs did make the pass
// 11 times slower on an Intel Xeon than its VEX forms (VMOVQ). Timing
// cannot be tested; the encoding can: every instruction on an X or Y
// register must be a V one.
func TestVEXOnly(t *testing.T) {
	src, err := os.ReadFile("index_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	vector := regexp.MustCompile(`\b[XY]([0-9]|1[0-5])\b`)
	text, checked := false, 0
	for n, line := range strings.Split(string(src), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "//") || strings.HasSuffix(f[0], ":"):
		case f[0] == "TEXT":
			text = true
		case text && vector.MatchString(line):
			checked++
			if !strings.HasPrefix(f[0], "V") {
				t.Errorf("index_amd64.s:%d: %s is legacy SSE; use its VEX form in _asm/gen.go and run make generate-asm", n+1, strings.TrimSpace(line))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no instruction on an X or Y register: is index_amd64.s the AVX2 builder?")
	}
}
