package jsonindex

import (
	"encoding/json"
	"testing"

	"github.com/evalmeter/evalmeter/internal/benchbody"
)

// BenchmarkIndex measures both builders beside json.Valid on the bodies
// of the engine's BenchmarkComputeSizes. `make bench-index` prints the
// ratios.
func BenchmarkIndex(b *testing.B) {
	for _, size := range benchbody.Sizes {
		body := size.Body()
		var dst []uint32 // reused, as a parser would
		run := func(name string, f func() bool) { benchbody.Run(b, size.Name+"/"+name, body, f) }
		for _, bl := range builders(b) {
			run(bl.name, func() bool {
				var err error
				dst, _, err = bl.index(dst[:0], body)
				return err == nil && len(dst) > 0
			})
		}
		run("json.Valid", func() bool { return json.Valid(body) })
	}
}
