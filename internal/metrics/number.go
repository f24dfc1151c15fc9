package metrics

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"
	"strconv"

	"github.com/evalmeter/evalmeter/internal/swar"
)

// number is a JSON number read as an IEEE-754 double (RFC 8785 §3.2.2.3).
// Besides the double it keeps the shortest decimal that round-trips it,
// mant × 10^exp with no trailing zeros in mant: the canonical form and the
// exact cost sum are both derived from those digits.
type number struct {
	f    float64
	mant uint64 // 0 for ±0
	exp  int32
	neg  bool
	// lit is the literal's place in the body, when it is already the
	// canonical form (litEnd > 0): offsets, not a slice, so that a number
	// holds no pointer and storing one costs no write barrier.
	litStart, litEnd uint32
}

// maxExactDigits is the count of significant decimal digits that always
// survive a trip through a double (DBL_DIG), so a literal with at most this
// many digits already is the shortest decimal of its double.
const maxExactDigits = 15

// readNumber reads the number at p.pos (RFC 8259 §6 grammar) into n.
func (p *parser) readNumber(n *number) error {
	end, bad := scanNumber(p.data, p.pos, n)
	if bad != numberOK {
		return p.syntaxErrorAt(end, bad.String())
	}
	p.endScalar(end)
	return nil
}

// numberError is what is wrong with a number literal.
type numberError uint8

const (
	numberOK numberError = iota
	numberNoDigit
	numberNoFraction
	numberNoExponent
)

func (e numberError) String() string {
	switch e {
	case numberNoDigit:
		return "expected a digit in a number"
	case numberNoFraction:
		return "expected a digit after the decimal point"
	case numberNoExponent:
		return "expected a digit in an exponent"
	}
	return ""
}

// scanNumber reads the number literal that starts at d[start] into n and
// returns where it ends; on a syntax error, where the error is and what.
// It reads the literal only: what follows it is the caller's to check.
func scanNumber(d []byte, start int, n *number) (int, numberError) {
	if end, ok := shortNumber(d, start, n); ok {
		return end, numberOK
	}
	return scanAnyNumber(d, start, n)
}

// shortNumber reads the literals that nearly every number of a request
// is, 8 bytes at a time: up to 7 digits with no leading zero, and at most
// a point and up to 7 more digits. It reports false for any other literal,
// and near the end of d, having written nothing; scanAnyNumber reads those.
// Its result is scanAnyNumber's, which TestShortNumber checks.
func shortNumber(d []byte, i int, n *number) (int, bool) {
	if i+16 > len(d) { // room for both words below
		return 0, false
	}
	w := binary.LittleEndian.Uint64(d[i:])
	k := bits.TrailingZeros64(swar.NonDigits(w)) / 8
	if k == 0 || k == 8 || k > 1 && d[i] == '0' {
		return 0, false
	}
	mant := swar.DigitsValue(w, k)
	end := i + k
	exp := 0
	lit := true // at most 7 digits: ECMAScript writes them as they are
	if d[end] == '.' {
		w := binary.LittleEndian.Uint64(d[end+1:])
		f := bits.TrailingZeros64(swar.NonDigits(w)) / 8
		if f == 0 || f == 8 {
			return 0, false
		}
		digits := k + f // significant digits
		if mant == 0 {
			zeros := bits.TrailingZeros64(swar.Highs&^swar.Match(w, '0')) / 8 // leading zeros
			digits = f - min(zeros, f)
		}
		mant = mant*pow10s[f] + swar.DigitsValue(w, f)
		exp = -f
		end += 1 + f
		// As in scanAnyNumber: no trailing zero, and 10^-6 or more.
		lit = d[end-1] != '0' && digits+exp > -6
	}
	if c := d[end]; c == 'e' || c == 'E' {
		return 0, false
	}
	*n = number{}
	if lit {
		n.litStart, n.litEnd = uint32(i), uint32(end)
	}
	if mant == 0 {
		return end, true
	}
	for mant%10 == 0 {
		mant /= 10
		exp++
	}
	n.f, n.mant, n.exp = exactValue(mant, exp), mant, int32(exp)
	return end, true
}

// exactValue returns mant × 10^exp, where mant has at most 15 digits and
// exp is from -22 to 22: both operands are exact doubles, so the result
// is rounded once (Clinger's fast path).
func exactValue(mant uint64, exp int) float64 {
	f := float64(mant)
	switch {
	case exp > 0:
		f *= math.Pow10(exp)
	case exp < 0:
		f /= math.Pow10(-exp)
	}
	return f
}

// pow10s are the powers of ten that a uint64 holds.
var pow10s = [20]uint64{
	1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
}

// scanAnyNumber is scanNumber for every literal.
func scanAnyNumber(d []byte, start int, n *number) (int, numberError) {
	i := start
	*n = number{}
	if i < len(d) && d[i] == '-' {
		n.neg = true
		i++
	}

	var (
		mant      uint64
		digits    int  // significant digits read into mant
		exp       int  // decimal exponent of mant
		truncated bool // digits beyond what mant holds were dropped
		lit       bool // the literal is the canonical form of its value
		// plain: the literal has the form ECMAScript gives its value, if
		// its digits are the shortest that round-trip, which lit knows
		// for up to 15 digits and shortestNearest or fromFloat tell beyond.
		plain bool
	)
	switch intStart := i; {
	case i < len(d) && d[i] == '0':
		i++
		lit = !n.neg // "0"; "-0" is written 0
		plain = lit
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for ; i < len(d) && isDigit(d[i]); i++ {
			if digits < 19 {
				mant = mant*10 + uint64(d[i]-'0')
				digits++
			} else {
				exp++
				truncated = truncated || d[i] != '0'
			}
		}
		// Up to 15 digits, no trailing zero is dropped and the value is below
		// 10^21, which ECMAScript writes without an exponent.
		lit = i-intStart <= maxExactDigits
		plain = i-intStart <= 21
	default:
		return i, numberNoDigit
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return i, numberNoFraction
		}
		for ; i < len(d) && isDigit(d[i]); i++ {
			if digits < 19 {
				mant = mant*10 + uint64(d[i]-'0')
				exp--
				if mant != 0 {
					digits++
				}
			} else {
				truncated = truncated || d[i] != '0'
			}
		}
		// Canonical when no trailing zero, at most 15 significant digits, and
		// at least 10^-6, below which ECMAScript writes an exponent.
		plain = plain && d[i-1] != '0' && digits+exp > -6
		lit = plain && digits <= maxExactDigits
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		lit, plain = false, false
		i++
		negExp := false
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			negExp = d[i] == '-'
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return i, numberNoExponent
		}
		e := 0
		for i < len(d) && isDigit(d[i]) {
			if e < 100000 { // saturate: anything this large is out of every range
				e = e*10 + int(d[i]-'0')
			}
			i++
		}
		if negExp {
			e = -e
		}
		exp += e
	}
	if lit {
		n.litStart, n.litEnd = uint32(start), uint32(i)
	}

	if mant == 0 {
		if n.neg {
			n.f = math.Copysign(0, -1)
		}
		return i, numberOK
	}
	for mant%10 == 0 {
		mant /= 10
		exp++
		digits--
	}
	if !truncated && digits <= maxExactDigits && exp >= -22 && exp <= 22 {
		n.f, n.mant, n.exp = exactValue(mant, exp), mant, int32(exp)
		if n.neg {
			n.f = -n.f
		}
		return i, numberOK
	}
	var f float64
	if m2, s, ok := nearestDouble(mant, -exp); ok && !truncated {
		// A literal of 16 to 19 digits with a point, as programs write a
		// double they computed (a latency from two clock readings): its
		// double and, nearly always, its canonical digits without
		// strconv, which takes about 0.2 µs for them.
		if f = double(m2, s); n.neg {
			f = -f
		}
		if shortestNearest(m2, s, mant, -exp) {
			n.f, n.mant, n.exp = f, mant, int32(exp)
			if plain {
				n.litStart, n.litEnd = uint32(start), uint32(i)
			}
			return i, numberOK
		}
	} else {
		f, _ = strconv.ParseFloat(string(d[start:i]), 64) // overflow gives ±Inf, caught by range checks
	}
	*n = fromFloat(f)
	if plain && !truncated && n.mant == mant && int(n.exp) == exp {
		n.litStart, n.litEnd = uint32(start), uint32(i)
	}
	return i, numberOK
}

// nearestDouble returns the double nearest to mant × 10^-k (ties to even)
// as m2 × 2^-s, 2^52 <= m2 < 2^53, s >= 1: for k from 1 to 19 and a value
// under 2^52. It reports false for any other, for strconv.ParseFloat. The
// arithmetic is exact, on integers of 128 bits.
func nearestDouble(mant uint64, k int) (m2 uint64, s int, ok bool) {
	if k < 1 || k > 19 || mant == 0 {
		return 0, 0, false
	}
	d := pow10s[k]
	// This s puts mant × 2^s / d in [2^52, 2^54), so the quotient fits in
	// 64 bits.
	if s = 53 + bits.Len64(d) - bits.Len64(mant); s < 1 {
		return 0, 0, false
	}
	x := uint128{lo: mant}.lsh(s)
	q, rem := bits.Div64(x.hi, x.lo, d)
	m2 = q
	if q >= 1<<53 { // a bit too many: round it off, the remainder sticky
		s--
		m2 = q >> 1
		if q&1 != 0 && (rem != 0 || m2&1 != 0) {
			m2++
		}
	} else if rem > d-rem || rem == d-rem && m2&1 != 0 {
		m2++
	}
	if m2 == 1<<53 { // rounded up to a power of two
		m2 >>= 1
		s--
	}
	return m2, s, s >= 1
}

// double returns m2 × 2^-s, as nearestDouble gives them.
func double(m2 uint64, s int) float64 {
	return math.Float64frombits(uint64(1075-s)<<52 | m2&(1<<52-1))
}

// shortestNearest reports whether mant × 10^-k is certainly the canonical
// digits of the double m2 × 2^-s (as nearestDouble gives it, and nearest
// to it): the shortest decimal that round-trips it, and of those the
// nearest to it (docs/design.md#51-reading-the-body). It reports false
// where a decimal with fewer digits is in the double's rounding interval
// or at its edge, or one with as many is as near or nearer; fromFloat
// then finds the digits.
func shortestNearest(m2 uint64, s int, mant uint64, k int) bool {
	// Scaled by 2^(s+2) × 10^k: the double is F = 4·m2·d; half the gap to
	// each neighbour is 2d (d below a power of two, where the gap below
	// is half as wide); j × 10^-k is j × 2^(s+2).
	d := pow10s[k]
	var F uint128
	F.hi, F.lo = bits.Mul64(m2<<2, d)
	above := uint128{lo: d}.lsh(1) // 2d: over 64 bits where k is 19
	below := above
	if m2 == 1<<52 {
		below = uint128{lo: d}
	}
	// The multiples of 10^-k in the rounding interval, edges included,
	// are a × 10^-k to b × 10^-k. A multiple of ten among them is a
	// decimal with fewer digits that round-trips, or may.
	a := F.sub(below).sub(uint128{lo: 1}).rsh(s+2) + 1
	b := F.add(above).rsh(s + 2)
	if b-b%10 >= a {
		return false
	}
	// mant × 10^-k must be strictly the multiple of 10^-k nearest to the
	// double: F is floor × 2^(s+2) and a remainder, whose top bit says
	// whether it is past half.
	floor, half, exact := F.rsh(s+2), F.bit(s+1), F.lowZero(s+1)
	return floor == mant && !half || floor+1 == mant && half && !exact
}

// uint128 is an unsigned integer of 128 bits, for nearestDouble and
// shortestNearest.
type uint128 struct{ hi, lo uint64 }

// lsh returns x << n, 0 <= n < 128, where the result fits.
func (x uint128) lsh(n int) uint128 {
	if n >= 64 {
		return uint128{hi: x.lo << (n - 64)}
	}
	return uint128{hi: x.hi<<n | x.lo>>(64-n), lo: x.lo << n}
}

// rsh returns the low 64 bits of x >> n, 0 <= n < 128.
func (x uint128) rsh(n int) uint64 {
	if n >= 64 {
		return x.hi >> (n - 64)
	}
	return x.lo>>n | x.hi<<(64-n)
}

func (x uint128) add(y uint128) uint128 {
	lo, carry := bits.Add64(x.lo, y.lo, 0)
	return uint128{hi: x.hi + y.hi + carry, lo: lo}
}

func (x uint128) sub(y uint128) uint128 {
	lo, borrow := bits.Sub64(x.lo, y.lo, 0)
	return uint128{hi: x.hi - y.hi - borrow, lo: lo}
}

// bit reports whether bit n of x is set, 0 <= n < 128.
func (x uint128) bit(n int) bool { return x.rsh(n)&1 != 0 }

// lowZero reports whether x's n lowest bits are all zero, 0 < n < 128.
func (x uint128) lowZero(n int) bool {
	if n >= 64 {
		return x.lo == 0 && x.hi<<(128-n) == 0
	}
	return x.lo<<(64-n) == 0
}

// within reports whether n is from 0 to max, and an integer if integer is
// set.
func (n *number) within(max float64, integer bool) bool {
	return n.f >= 0 && n.f <= max && (!integer || n.f == math.Trunc(n.f))
}

// fromFloat returns the number of a double, with its shortest decimal.
func fromFloat(f float64) number {
	n := number{f: f, neg: math.Signbit(f)}
	if f == 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return n
	}
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], math.Abs(f), 'e', -1, 64) // d[.ddd]e±x
	var mant uint64
	fracDigits := 0
	dot := false
	i := 0
	for ; s[i] != 'e'; i++ {
		if s[i] == '.' {
			dot = true
			continue
		}
		mant = mant*10 + uint64(s[i]-'0')
		if dot {
			fracDigits++
		}
	}
	i++ // 'e'
	negExp := s[i] == '-'
	e := 0
	for i++; i < len(s); i++ {
		e = e*10 + int(s[i]-'0')
	}
	if negExp {
		e = -e
	}
	exp := e - fracDigits
	for mant%10 == 0 {
		mant /= 10
		exp++
	}
	n.mant, n.exp = mant, int32(exp)
	return n
}

// appendNumber appends n, read from body, as ECMAScript's
// Number.prototype.toString does, which is the number form of RFC 8785
// §3.2.2.3.
func appendNumber(dst, body []byte, n *number) []byte {
	if n.litEnd > 0 {
		return appendShort(dst, body[n.litStart:n.litEnd])
	}
	if n.mant == 0 {
		return append(dst, '0') // also for -0
	}
	if n.neg {
		dst = append(dst, '-')
	}
	var buf [20]byte
	digits := strconv.AppendUint(buf[:0], n.mant, 10)
	k := len(digits)
	point := k + int(n.exp) // value = 0.digits × 10^point
	switch {
	case k <= point && point <= 21:
		dst = append(dst, digits...)
		for range point - k {
			dst = append(dst, '0')
		}
	case 0 < point && point <= 21:
		dst = append(dst, digits[:point]...)
		dst = append(dst, '.')
		dst = append(dst, digits[point:]...)
	case -6 < point && point <= 0:
		dst = append(dst, '0', '.')
		for range -point {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if point-1 > 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(point-1), 10)
	}
	return dst
}

// decimalSum returns the double nearest to the exact sum of the shortest
// decimals of ns, so that 0.1 + 0.2 is 0.3. ns must be non-negative.
func decimalSum(ns []number) float64 {
	scale := 0 // digits after the point needed to hold every term exactly
	for _, n := range ns {
		if n.mant != 0 && int(-n.exp) > scale {
			scale = int(-n.exp)
		}
	}
	if sum, ok := uintSum(ns, scale); ok {
		if sum < 1<<53 && scale <= 22 {
			return float64(sum) / math.Pow10(scale) // exact operands, one rounding
		}
		f, _ := new(big.Rat).SetFrac(new(big.Int).SetUint64(sum), pow10Int(scale)).Float64()
		return f
	}
	sum := new(big.Int)
	term := new(big.Int)
	for _, n := range ns {
		if n.mant == 0 {
			continue
		}
		term.SetUint64(n.mant)
		term.Mul(term, pow10Int(int(n.exp)+scale))
		sum.Add(sum, term)
	}
	f, _ := new(big.Rat).SetFrac(sum, pow10Int(scale)).Float64()
	return f
}

// uintSum adds the terms scaled by 10^scale in a uint64, or reports false when
// they do not fit.
func uintSum(ns []number, scale int) (uint64, bool) {
	var sum uint64
	for _, n := range ns {
		if n.mant == 0 {
			continue
		}
		shift := int(n.exp) + scale
		if shift > 19 {
			return 0, false
		}
		hi, term := bits.Mul64(n.mant, pow10s[shift])
		if hi != 0 {
			return 0, false
		}
		var carry uint64
		sum, carry = bits.Add64(sum, term, 0)
		if carry != 0 {
			return 0, false
		}
	}
	return sum, true
}

func pow10Int(n int) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
