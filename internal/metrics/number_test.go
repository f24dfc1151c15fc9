package metrics

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

func readNum(t *testing.T, lit string) number {
	t.Helper()
	p := parser{data: []byte(lit)}
	p.start()
	var n number
	err := p.readNumber(&n)
	if err != nil {
		t.Fatalf("readNumber(%q): %v", lit, err)
	}
	if p.pos != len(lit) {
		t.Fatalf("readNumber(%q) stopped at %d", lit, p.pos)
	}
	return n
}

func TestReadNumber(t *testing.T) {
	tests := []struct {
		lit       string
		canonical string // RFC 8785 form
	}{
		{"0", "0"},
		{"-0", "0"},
		{"-0.0e5", "0"},
		{"1", "1"},
		{"10", "10"},
		{"1E2", "100"},
		{"2.50", "2.5"},
		{"0.000001", "0.000001"},
		{"0.0000001", "1e-7"},
		{"123456789012345678901", "123456789012345680000"},
		{"1e21", "1e+21"},
		{"1e400", "0"}, // overflow: Inf, never canonicalized (out of range)
		{"1e-400", "0"},
		{"5e-324", "5e-324"},
		{"0.1", "0.1"},
		{"0.30000000000000004", "0.30000000000000004"},
		{"0.30000000000000000001", "0.3"},
		{"86400000.0000000001", "86400000"},
		{"1.0000000000000000001", "1"},
		{"-12.5", "-12.5"},
		{"999999999999999", "999999999999999"},
		{"9007199254740993", "9007199254740992"},
		// Beyond 15 digits a literal is its canonical form only when its
		// digits are the shortest that round-trip.
		{"42.90461989273158", "42.90461989273158"},
		{"0.10000000000000001", "0.1"},
		{"42.904619892731580", "42.90461989273158"},
		{"12345678901234567", "12345678901234568"},
		{"100000000000000000000", "100000000000000000000"},
		{"1000000000000000000000", "1e+21"},
		{"0.0000012345678901234567", "0.0000012345678901234567"},
		{"0.00000012345678901234567", "1.2345678901234566e-7"},
	}
	for _, tt := range tests {
		n := readNum(t, tt.lit)
		want, _ := strconv.ParseFloat(tt.lit, 64)
		if n.f != want || math.Signbit(n.f) != math.Signbit(want) {
			t.Errorf("readNumber(%q).f = %v, want %v", tt.lit, n.f, want)
		}
		if math.IsInf(n.f, 0) {
			continue
		}
		if got := string(appendNumber(nil, []byte(tt.lit), &n)); got != tt.canonical {
			t.Errorf("canonical(%q) = %s, want %s", tt.lit, got, tt.canonical)
		}
	}
}

// TestNumberFormsAgree checks, over many doubles, that the digits the fast
// path keeps from a literal are the shortest digits of its double, and that
// the canonical form is gowebpki/jcs's.
func TestNumberFormsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(f float64) {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return
		}
		want, err := jcs.NumberToJSON(f)
		if err != nil {
			t.Fatalf("jcs.NumberToJSON(%v): %v", f, err)
		}
		if got := string(appendNumber(nil, nil, ptr(fromFloat(f)))); got != want {
			t.Fatalf("appendNumber(fromFloat(%v)) = %s, jcs says %s", f, got, want)
		}
		for _, lit := range []string{
			strconv.FormatFloat(f, 'g', -1, 64),
			strconv.FormatFloat(f, 'f', -1, 64),
			strconv.FormatFloat(f, 'e', 14, 64), // 15 digits: the fast path
		} {
			n := readNum(t, lit)
			g, _ := strconv.ParseFloat(lit, 64)
			if n.f != g {
				t.Fatalf("readNumber(%q).f = %v, want %v", lit, n.f, g)
			}
			if got, want := string(appendNumber(nil, []byte(lit), &n)), string(appendNumber(nil, nil, ptr(fromFloat(g)))); got != want {
				t.Fatalf("canonical(%q) = %s, want %s", lit, got, want)
			}
		}
	}
	for range 20000 {
		check(math.Float64frombits(rng.Uint64()))         // any double
		check(float64(rng.IntN(100000000)) / 1000)        // latencies in ms
		check(math.Round(rng.Float64()*1e10) / 1e6)       // costs
		check(float64(rng.Int64N(1<<62)) * rng.Float64()) // large
	}
}

func TestDecimalSum(t *testing.T) {
	tests := []struct {
		name string
		lits []string
		want float64
	}{
		{"tenths", []string{"0.1", "0.2"}, 0.3},
		{"design example", []string{"0.1", "0.2", "0.3", "0.7", "1.1", "2.2"}, 4.6},
		{"integers", []string{"1", "1000000", "20"}, 1000021},
		{"zeros", []string{"0", "-0"}, 0},
		{"tiny beside large", []string{"1e-300", "1000000"}, 1000000},
		{"17 digits", []string{"0.30000000000000004", "0.1"}, 0.40000000000000004},
		{"max costs", repeat("1000000", 500), 500000000},
		{"many decimals", repeat("999999.999999", 500), 499999999.9995},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ns []number
			for _, l := range tt.lits {
				ns = append(ns, readNum(t, l))
			}
			if got := decimalSum(ns); got != tt.want {
				t.Errorf("decimalSum = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDecimalSumExact compares the sum with exact rational arithmetic on
// the shortest decimals, over random costs of every scale.
func TestDecimalSumExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		ns := make([]number, 1+rng.IntN(50))
		exact := new(big.Rat)
		for i := range ns {
			f := rng.Float64() * math.Pow10(rng.IntN(30)-23)
			ns[i] = fromFloat(f)
			r, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
			if !ok {
				t.Fatal("bad rational")
			}
			exact.Add(exact, r)
		}
		want, _ := exact.Float64()
		if got := decimalSum(ns); got != want {
			t.Fatalf("decimalSum = %v, want %v", got, want)
		}
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// TestShortNumber reads literals of every form shortNumber might take,
// followed by every kind of byte, and checks that where it reads one it
// gives what scanAnyNumber gives, and that it reads the forms it is for.
func TestShortNumber(t *testing.T) {
	ints := []string{"", "-", "0", "00", "01", "1", "9", "10", "100", "1000000", "9999999", "1234567", "12345678", "-0", "-12"}
	fracs := []string{"", ".", ".0", ".5", ".50", ".05", ".000032", ".0000001", ".000001", ".1234567", ".12345678", ".0000000", ".9999999"}
	ends := []string{"", ",", "}", "]", " ", "e5", "E-2", "e", "x", ".", "0", "\x80", "\""}
	read := 0
	for _, i := range ints {
		for _, f := range fracs {
			for _, e := range ends {
				lit := i + f + e
				for pad := range 18 { // from no room after the literal to plenty
					d := []byte(" " + lit + strings.Repeat(",", pad))
					var short, any number
					end, ok := shortNumber(d, 1, &short)
					if !ok {
						continue
					}
					read++
					anyEnd, bad := scanAnyNumber(d, 1, &any)
					if bad != numberOK || anyEnd != end || short != any {
						t.Fatalf("%q: shortNumber gives %+v ending at %d; scanAnyNumber %+v ending at %d (%v)", d, short, end, any, anyEnd, bad)
					}
				}
			}
		}
	}
	d := []byte(`{"latency_ms":1037.001,"cost":0.000032,"input_tokens":1013,"output_tokens":207}`)
	for _, at := range []int{14, 30, 54} {
		var n number
		if _, ok := shortNumber(d, at, &n); !ok {
			t.Errorf("shortNumber does not read the number at %d of %s", at, d)
		}
	}
	if read < 500 {
		t.Errorf("shortNumber reads only %d of the literals", read)
	}
}

// TestWithin checks the range and integer checks at their edges, for every
// maximum the engine uses.
func TestWithin(t *testing.T) {
	for _, max := range []float64{MaxLatencyMS, MaxTokens, MaxCost, MaxSteps} {
		tests := []struct {
			f             float64
			integer, want bool
		}{
			{0, true, true},
			{math.Copysign(0, -1), true, true},
			{1, true, true},
			{0.5, true, false},
			{0.5, false, true},
			{max, true, true},
			{max - 0.5, true, false},
			{math.Nextafter(max, 0), true, false},
			{math.Nextafter(max, 0), false, true},
			{math.Nextafter(max, math.Inf(1)), false, false},
			{-1, false, false},
			{math.Inf(1), false, false},
			{math.NaN(), false, false},
			{math.NaN(), true, false},
		}
		for _, tt := range tests {
			n := number{f: tt.f}
			if got := n.within(max, tt.integer); got != tt.want {
				t.Errorf("within(%v, max %v, integer %v) = %v, want %v", tt.f, max, tt.integer, got, tt.want)
			}
		}
	}
}

// TestLongLiterals holds nearestDouble and shortestNearest to strconv, on
// the literals of doubles and on their near misses: the double must be
// ParseFloat's, and where shortestNearest reports the digits canonical,
// they must be the double's shortest digits (fromFloat). It must also
// report them so for nearly every double's shortest literal, which is what
// it is for.
func TestLongLiterals(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(mant uint64, k int) (canonical bool) {
		for mant%10 == 0 && k > 0 { // as scanAnyNumber calls them
			mant /= 10
			k--
		}
		m2, s, ok := nearestDouble(mant, k)
		if !ok {
			return false
		}
		lit := decimal(mant, k)
		f := double(m2, s)
		if want, _ := strconv.ParseFloat(lit, 64); f != want {
			t.Fatalf("nearestDouble(%d, %d) = %v; ParseFloat(%s) = %v", mant, k, f, lit, want)
		}
		if !shortestNearest(m2, s, mant, k) {
			return false
		}
		if n := fromFloat(f); n.mant != mant || int(n.exp) != -k {
			t.Fatalf("shortestNearest says %s is canonical; the shortest digits of %v are %d × 10^%d", lit, f, n.mant, n.exp)
		}
		return true
	}
	shortest, canonical := 0, 0
	for range 200000 {
		var f float64
		switch rng.IntN(4) {
		case 0:
			f = rng.Float64() * 1e5 // latencies in ms, from clock readings
		case 1:
			f = rng.Float64() / 100 // costs
		case 2:
			f = math.Float64frombits(rng.Uint64N(math.Float64bits(1<<53)-math.Float64bits(1e-4)) + math.Float64bits(1e-4))
		case 3:
			f = math.Ldexp(1+float64(rng.IntN(3))*0x1p-52, rng.IntN(60)-13) // at powers of two
		}
		n := fromFloat(f)
		if n.exp >= 0 || n.exp < -19 {
			continue
		}
		mant, k := n.mant, int(-n.exp)
		shortest++
		if check(mant, k) {
			canonical++
		}
		// Near misses: digits that are not the shortest or not the nearest.
		check(mant+1, k)
		check(mant-1, k)
		if k < 19 && mant < 1e18 {
			check(mant*10+rng.Uint64N(10), k+1)
			check(mant*10+5, k+1)
		}
		check(mant/10, k-1)
		check(rng.Uint64N(1e19), rng.IntN(19)+1) // any digits
		// Halfway between two doubles, and just off it: rounding's ties.
		e := rng.IntN(3) + 1 // (m + 1/2) × 2^-e is (2m + 1) × 5^(e+1) × 10^-(e+1)
		mid := (2*(1<<52+rng.Uint64N(1<<52)) + 1) * []uint64{25, 125, 625}[e-1]
		for _, j := range []uint64{mid - 1, mid, mid + 1} {
			check(j, e+1)
		}
	}
	t.Logf("%d of %d shortest literals read without strconv", canonical, shortest)
	if canonical < shortest*99/100 {
		t.Errorf("shortestNearest reports %d of %d shortest literals canonical; want nearly all", canonical, shortest)
	}
	for _, tt := range []struct {
		mant uint64
		k    int
		want bool
	}{
		{4290461989273158, 14, true},   // 42.90461989273158
		{30000000000000004, 17, true},  // 0.30000000000000004
		{10000000000000001, 17, false}, // 0.10000000000000001 is 0.1
		{1234567890123456, 4, true},    // 123456789012.3456
		{9007199254740992, 1, false},   // a tie: .2 and .3 are as near to 900719925474099.25
		{45035996273704961, 1, false},  // 2^52 and more: strconv reads it
		{23450000000000003, 19, true},  // 0.0023450000000000003: 2·10^19 overflows 64 bits
		{23450000000000002, 19, false}, // 0.0023450000000000002 is …003
		{78125000000000035, 19, false}, // 0.0078125000000000035 is 0.007812500000000003
		{99999999999999999, 17, false}, // 0.99999999999999999 is 1
		{12345678901234567, 20, false}, // k beyond 19: strconv reads it
		{12345678901234567, 0, false},  // no point: strconv reads it
		{1, 1, true},                   // 0.1
	} {
		if got := check(tt.mant, tt.k); got != tt.want {
			t.Errorf("%s: read without strconv %t, want %t", decimal(tt.mant, tt.k), got, tt.want)
		}
	}
}

// decimal returns mant × 10^-k as a literal.
func decimal(mant uint64, k int) string {
	s := strconv.FormatUint(mant, 10)
	if k == 0 {
		return s
	}
	if len(s) <= k {
		s = strings.Repeat("0", k-len(s)+1) + s
	}
	return s[:len(s)-k] + "." + s[len(s)-k:]
}
