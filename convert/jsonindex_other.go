//go:build !amd64 || purego

package convert

// indexFast reports whether package jsonindex builds its index with SIMD
// here: not in this build (see jsonindex_amd64.go).
func indexFast() bool { return false }
