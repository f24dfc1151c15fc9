//go:build !amd64 || purego

package jsonindex

// best is the builder Index uses: the portable one, as this build has no
// assembly.
var best blocksFunc = blocksGo

// hasAVX2 reports whether blocksAVX2 can run here: never in this build.
const hasAVX2 = false

// blocksAVX2 is not in this build; tests skip it (hasAVX2).
var blocksAVX2 blocksFunc = nil
