//go:build amd64 && !purego

package convert

import "golang.org/x/sys/cpu"

// indexFast reports whether package jsonindex builds its index with SIMD
// here: its own choice of builder, repeated. Its portable builder is
// slower than skipStringFrom, so elsewhere skip reads strings byte by byte.
func indexFast() bool { return cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpu.X86.HasBMI1 }
