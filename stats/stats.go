// Package stats compares two evaluation runs of the same cases, a baseline
// and a candidate, and says whether the candidate passes fewer of them than
// noise explains.
//
// It is pure: no I/O, no clock, no randomness. Every figure is a closed
// formula, given in the doc comment of the function that computes it, so that
// a reader can check any of them by hand. docs/compare.md explains how the
// figures become a verdict; stats/testdata/compare-vectors.json holds values
// computed by an independent implementation (hack/stats/vectors.py).
//
// The unit of analysis is the group: a case's repeat group when it has one,
// else the case itself. Repeated attempts of one task are not independent
// observations, so they are averaged into one score per group before the
// groups are compared.
package stats

import "math"

// Z95 is the two-sided 95% quantile of the standard normal distribution used
// by every interval here.
const Z95 = 1.959964

// DetectableFactor times a paired standard error is the smallest true
// difference that a two-sided 5% test detects with 80% power:
// z(0.975) + z(0.80) = 1.96 + 0.84.
const DetectableFactor = 2.8

// Interval is a closed interval [lo, hi]; it marshals as a two-element array.
type Interval [2]float64

// Lo is the interval's lower bound.
func (iv Interval) Lo() float64 { return iv[0] }

// Hi is the interval's upper bound.
func (iv Interval) Hi() float64 { return iv[1] }

// Wilson is the Wilson score interval at 95% for passed successes in n
// trials (E. B. Wilson, 1927):
//
//	p = passed/n, d = 1 + z²/n
//	center = (p + z²/(2n)) / d
//	half   = z·√(p(1−p)/n + z²/(4n²)) / d
//	[center − half, center + half], clamped to [0, 1]
//
// with z = Z95. Unlike p ± z·√(p(1−p)/n) it stays informative at rates of 0
// and 1. With n = 0 there is no information: [0, 1].
func Wilson(passed, n int) Interval {
	if n <= 0 {
		return Interval{0, 1}
	}
	nf := float64(n)
	p := float64(passed) / nf
	z2 := Z95 * Z95
	d := 1 + z2/nf
	center := (p + z2/(2*nf)) / d
	half := Z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf)) / d
	return Interval{math.Max(0, center-half), math.Min(1, center+half)}
}

// McNemarExact is the two-sided p-value of McNemar's exact test, for b
// discordant pairs one way (pass to fail) and c the other (fail to pass):
//
//	p = min(1, 2·Σ_{i=0}^{min(b,c)} C(b+c, i)·0.5^(b+c)),  and 1 when b+c = 0.
//
// Under no change each discordant pair flips either way with probability ½,
// so this is the binomial sign test on the flips.
func McNemarExact(b, c int) float64 {
	n := b + c
	if n <= 0 {
		return 1
	}
	m := min(b, c)
	// In logarithms: 0.5^n underflows a float64 beyond n = 1074.
	lgN, _ := math.Lgamma(float64(n + 1))
	sum := 0.0
	for i := 0; i <= m; i++ {
		lgI, _ := math.Lgamma(float64(i + 1))
		lgNI, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lgN - lgI - lgNI - float64(n)*math.Ln2)
	}
	return math.Min(1, 2*sum)
}

// PassAtK is the unbiased estimator of pass@k of Chen et al., "Evaluating
// Large Language Models Trained on Code" (2021): the chance that at least one
// of k attempts drawn without replacement from n attempts, c of them passing,
// passes:
//
//	pass@k = 1 − C(n−c, k)/C(n, k)
//
// It requires 1 ≤ k ≤ n.
func PassAtK(n, c, k int) float64 {
	return 1 - chooseRatio(n-c, n, k)
}

// PassHatK is pass^k as tau-bench defines it (Yao et al., "τ-bench", 2024):
// the chance that all of k attempts drawn without replacement from n
// attempts, c of them passing, pass:
//
//	pass^k = C(c, k)/C(n, k)
//
// It requires 1 ≤ k ≤ n.
func PassHatK(n, c, k int) float64 {
	return chooseRatio(c, n, k)
}

// chooseRatio is C(a, k)/C(n, k) = Π_{i<k} (a−i)/(n−i), for a ≤ n, and 0
// when a < k.
func chooseRatio(a, n, k int) float64 {
	if a < k {
		return 0
	}
	r := 1.0
	for i := 0; i < k; i++ {
		r *= float64(a-i) / float64(n-i)
	}
	return r
}

// Difference is a paired mean difference, candidate minus baseline, over the
// groups that both runs have. Diff is nil with no such group; SE and CI95
// are nil with fewer than two, where a standard deviation is undefined.
type Difference struct {
	Groups int       `json:"groups"`
	Diff   *float64  `json:"diff"`
	SE     *float64  `json:"se"`
	CI95   *Interval `json:"ci_95"`
}

// Paired is the paired mean difference of the per-group differences d:
//
//	diff = mean(d)
//	se   = s(d)/√G, s the sample standard deviation (divisor G − 1)
//	ci   = diff ± Z95·se
//
// The pairing removes the variance that the two runs share, the difficulty
// of each case, which a comparison of two independent rates would count as
// noise.
func Paired(d []float64) Difference {
	g := len(d)
	out := Difference{Groups: g}
	if g == 0 {
		return out
	}
	sum := 0.0
	for _, v := range d {
		sum += v
	}
	mean := sum / float64(g)
	out.Diff = &mean
	if g < 2 {
		return out
	}
	ss := 0.0
	for _, v := range d {
		ss += (v - mean) * (v - mean)
	}
	se := math.Sqrt(ss/float64(g-1)) / math.Sqrt(float64(g))
	out.SE = &se
	out.CI95 = &Interval{mean - Z95*se, mean + Z95*se}
	return out
}
