//go:build cputime && linux

package metrics_test

import (
	"crypto/sha256"
	"encoding/json"
	"runtime"
	"testing"

	"github.com/bytedance/sonic"
	"golang.org/x/sys/unix"

	"github.com/evalmeter/evalmeter/internal/benchbody"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// TestCPUTime prints the thread CPU time of the engine and of its
// baselines on the benchmarks' bodies: the least of 25 runs, which other
// work on a shared machine can only make longer. hack/bench/engine-ab.sh
// runs it for two revisions in turn (`make bench-ab`); wall-clock medians
// on a noisy machine drift more than the changes it compares.
func TestCPUTime(t *testing.T) {
	bodies := map[string][]byte{}
	for _, v := range loadVectors(t) {
		if v.Name == benchVector {
			bodies["vector"] = []byte(v.Body)
		}
	}
	for _, s := range benchbody.Sizes {
		bodies[s.Name] = s.Body()
		bodies[s.Name+"-clocked"] = s.Clocked()
	}
	for _, name := range []string{"10KB", "vector", "130KB", "130KB-clocked", "256KB"} {
		body := bodies[name]
		n := 2 << 20 / len(body) // about 2 MB a run
		var meter metrics.Meter  // as the API runs the engine
		engine := leastCPU(t, n, func() bool {
			_, err := meter.Compute(body)
			return err == nil
		})
		valid := leastCPU(t, n, func() bool { return json.Valid(body) })
		sonicValid := leastCPU(t, n, func() bool { return sonic.Valid(body) })
		sum := leastCPU(t, n, func() bool { return sha256.Sum256(body) != [sha256.Size]byte{} })
		t.Logf("cputime %-13s engine %6.1f µs  json.Valid %6.1f µs (%.2f)  sonic.Valid %6.1f µs (%.2f)  sha256 %6.1f µs",
			name, engine, valid, engine/valid, sonicValid, engine/sonicValid, sum)
	}
}

// leastCPU returns the least thread CPU time, in µs, that n calls of f
// took in any of 25 runs.
func leastCPU(t *testing.T, n int, f func() bool) float64 {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	least := 0.0
	for run := range 25 {
		start := threadCPU(t)
		for range n {
			if !f() {
				t.Fatal("the function fails on the body")
			}
		}
		if us := float64(threadCPU(t)-start) / float64(n) / 1e3; run == 0 || us < least {
			least = us
		}
	}
	return least
}

func threadCPU(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}
