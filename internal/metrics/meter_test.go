package metrics_test

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/evalmeter/evalmeter/internal/benchbody"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// TestMeterReuse checks that a Meter's answer does not depend on the
// bodies it read before: one Meter reads every body of the corpus in
// three orders, and each answer, metrics or error, must be that of a new
// Meter.
func TestMeterReuse(t *testing.T) {
	bodies := corpus(t)
	for _, size := range benchbody.Sizes {
		bodies["bench/"+size.Name] = size.Body()
	}
	names := slices.Sorted(maps.Keys(bodies))
	backwards := slices.Clone(names)
	slices.Reverse(backwards)
	shuffled := slices.Clone(names)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) {
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	})
	var m metrics.Meter
	for _, order := range [][]string{names, backwards, shuffled} {
		for _, name := range order {
			want, wantErr := metrics.Compute(bodies[name])
			got, gotErr := m.Compute(bodies[name])
			if diff := cmp.Diff(wantErr, gotErr); diff != "" {
				t.Fatalf("%s: errors differ (-new +reused):\n%s", name, diff)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s: metrics differ (-new +reused):\n%s", name, diff)
			}
		}
	}
}

// TestMeterAllocations checks that a reused Meter reads a request
// without allocating: only the result that Metrics builds is new.
func TestMeterAllocations(t *testing.T) {
	for _, size := range benchbody.Sizes {
		body := size.Body()
		var m metrics.Meter
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := m.Parse(body); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: a reused Meter allocates %.1f times a request; want 0", size.Name, allocs)
		}
	}
}
