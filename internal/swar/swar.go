// Package swar classifies the bytes of JSON text 8 at a time in a uint64
// (SIMD within a register), for the scanners of the metrics engine and of
// the converters.
package swar

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

// NonASCII marks with its high bit each byte of w that is not ASCII.
func NonASCII(w uint64) uint64 { return w & highs }
