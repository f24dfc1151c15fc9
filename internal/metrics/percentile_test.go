package metrics

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/evalmeter/evalmeter/api"
)

func TestLatencyPercentiles(t *testing.T) {
	tests := []struct {
		n        int
		p50, p95 float64
	}{
		{1, 1, 1},
		{2, 1, 2},
		{3, 2, 3},
		{20, 10, 19},
		{21, 11, 20},
		{100, 50, 95},
		{499, 250, 475}, // p95 is ceil(474.05): rounding would give 474
		{500, 250, 475},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range tests {
		seq := make([]float64, tt.n)
		for i := range seq {
			seq[i] = float64(i + 1)
		}
		rng.Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })
		got := latencyPercentiles(seq)
		want := api.LatencyMetrics{P50: tt.p50, P95: tt.p95, Max: float64(tt.n)}
		if got != want {
			t.Errorf("n=%d: got %+v, want %+v", tt.n, got, want)
		}
	}
}

// TestSelectRankAgreesWithSort checks the selection against a sort on the
// orders that break naive quickselects: sorted, reversed, constant, few
// distinct values, organ pipes and random.
func TestSelectRankAgreesWithSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	orders := map[string]func(i, n int) float64{
		"sorted":   func(i, n int) float64 { return float64(i) },
		"reversed": func(i, n int) float64 { return float64(n - i) },
		"constant": func(i, n int) float64 { return 7 },
		"few":      func(i, n int) float64 { return float64(rng.IntN(3)) },
		"organ":    func(i, n int) float64 { return float64(min(i, n-i)) },
		"random":   func(i, n int) float64 { return rng.Float64() * 1000 },
	}
	for name, order := range orders {
		for _, n := range []int{1, 2, 15, 16, 17, 33, 100, 499, 500} {
			a := make([]float64, n)
			for i := range a {
				a[i] = order(i, n)
			}
			sorted := slices.Sorted(slices.Values(a))
			for _, k := range []int{0, n / 2, n - 1, (95*n+99)/100 - 1} {
				b := slices.Clone(a)
				if got := selectRank(b, k); got != sorted[k] {
					t.Fatalf("%s n=%d k=%d: got %v, want %v", name, n, k, got, sorted[k])
				}
				for i := range b {
					if i < k && b[i] > b[k] || i > k && b[i] < b[k] {
						t.Fatalf("%s n=%d k=%d: a[%d]=%v is on the wrong side of a[k]=%v", name, n, k, i, b[i], b[k])
					}
				}
			}
		}
	}
}
