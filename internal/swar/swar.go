// Package swar classifies the bytes of JSON text 8 at a time in a uint64
// (SIMD within a register), for the scanners of the metrics engine and of
// the converters.
package swar

// Highs has every byte's high bit, where this package's functions mark a
// byte: ^m & Highs marks the bytes that m does not.
const Highs = highs

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// StringStops marks with its high bit each byte of w (8 bytes,
// little-endian) that ends a plain run inside a JSON string: '"', '\\' or a
// control character. A mark can be false only above a true one (a borrow
// runs upward), so the lowest mark is always exact.
func StringStops(w uint64) uint64 {
	quote := w ^ ones*'"'      // 0 where '"'
	backslash := w ^ ones*'\\' // 0 where '\\'
	zeroQuote := (quote - ones) &^ quote
	zeroBackslash := (backslash - ones) &^ backslash
	control := (w - ones*0x20) &^ w
	return (zeroQuote | zeroBackslash | control) & highs
}

// Control marks with its high bit each byte of w below 0x20, exactly.
func Control(w uint64) uint64 {
	// The low 7 bits plus 0x60 reach 0x80 from 0x20 up, and cannot carry.
	return ^((w&^highs + ones*0x60) | w) & highs
}

// NonASCII marks with its high bit each byte of w that is not ASCII.
func NonASCII(w uint64) uint64 { return w & highs }

// Match marks with its high bit each byte of w equal to c, exactly: unlike
// StringStops, no borrow runs between bytes, so every mark is true. It
// costs a few more operations; use it where every match counts, not only
// the first.
func Match(w uint64, c byte) uint64 {
	x := w ^ ones*uint64(c) // 0 where c
	// Adding 0x7f to each byte's low 7 bits sets its high bit unless they
	// are all zero, and cannot carry into the next byte.
	return ^((x&^highs + ones*0x7f) | x) & highs
}

// Gather packs the high bits of the 8 bytes of m into the low 8 bits of
// the result, the lowest byte's into bit 0.
func Gather(m uint64) uint64 {
	return (m & highs) * 0x0002040810204081 >> 56
}

// Between marks with its high bit each byte of w from lo to hi, exactly,
// where lo ≥ 1 and hi < 0x7f: a byte above 0x7f is never marked.
func Between(w uint64, lo, hi byte) uint64 {
	// Each sum of a byte's low 7 bits and at most 0x80 stays in its byte.
	low := w &^ highs
	atLeastLo := low + ones*uint64(0x80-lo)
	aboveHi := low + ones*uint64(0x7f-hi)
	return atLeastLo &^ aboveHi &^ w & highs
}

// NonDigits marks with its high bit each byte of w that is not a decimal
// digit, exactly.
func NonDigits(w uint64) uint64 { return ^Between(w, '0', '9') & highs }

// DigitsValue returns the value of the k decimal digits (1 to 8) that
// start w (little-endian), the first the most significant. The bytes after
// them are ignored.
func DigitsValue(w uint64, k int) uint64 {
	w <<= 8 * (8 - k) // the digits to the top, zeros before them
	w = (w & (ones * 0x0f)) * (10<<8 + 1) >> 8
	w = (w & 0x00ff00ff00ff00ff) * (100<<16 + 1) >> 16
	return (w & 0x0000ffff0000ffff) * (10000<<32 + 1) >> 32
}
