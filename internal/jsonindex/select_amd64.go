//go:build !purego

package jsonindex

import "golang.org/x/sys/cpu"

// hasAVX2 reports whether blocksAVX2 can run: it uses AVX2, PCLMULQDQ
// (the prefix XOR) and BMI1 (TZCNT, BLSR, ANDN).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpu.X86.HasBMI1

// useAVX2 is the choice of Index, made once from the CPU's features: the
// package's only global. Tests call both builders through index.
var useAVX2 = hasAVX2
