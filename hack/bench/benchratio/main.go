// Command benchratio reads `go test -bench -benchmem` output and prints the
// median time of one benchmark beside baselines measured in the same run,
// as ratios against targets. It exits 1 when a target is missed, so that a
// regression is seen; `make test` never runs it, as timing is not a test.
//
//	benchratio -target Compute/engine -max-allocs 100 \
//	    -baseline 'Compute/json.Valid<=0.6' -baseline Compute/sha256 FILE
//
// Names are as benchfmt reads them: without the Benchmark prefix and the
// -GOMAXPROCS suffix.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
)

type baseline struct {
	name     string
	maxRatio float64 // target time ÷ baseline time must not exceed it; 0: no target
}

type baselines []baseline

func (b *baselines) String() string { return fmt.Sprint(*b) }

func (b *baselines) Set(s string) error {
	name, ratio, ok := strings.Cut(s, "<=")
	if !ok {
		*b = append(*b, baseline{name: s}) // printed beside the others, no target
		return nil
	}
	if name == "" {
		return errors.New(`want NAME or NAME<=RATIO`)
	}
	r, err := strconv.ParseFloat(ratio, 64)
	if err != nil {
		return fmt.Errorf("ratio: %w", err)
	}
	*b = append(*b, baseline{name, r})
	return nil
}

func main() {
	target := flag.String("target", "", "benchmark measured against the baselines")
	maxAllocs := flag.Float64("max-allocs", 0, "allocations per op the target must stay under (0: no check)")
	var bases baselines
	flag.Var(&bases, "baseline", "NAME<=RATIO: a baseline and the most the target may take relative to it; NAME alone: its ratio is printed with no target (repeatable)")
	flag.Parse()
	if *target == "" || len(bases) == 0 || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	times, allocs, err := read(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(2)
	}

	names := []string{*target}
	for _, b := range bases {
		names = append(names, b.name)
	}
	for _, n := range names {
		if len(times[n]) == 0 {
			fmt.Fprintf(os.Stderr, "benchratio: no results for %s in %s\n", n, flag.Arg(0))
			os.Exit(2)
		}
		fmt.Printf("%-45s %10.1f µs/op  %7.0f allocs/op  (median of %d)\n", n, median(times[n])*1e6, median(allocs[n]), len(times[n]))
	}

	missed := false
	check := func(what string, got, limit float64, strict bool) {
		ok := got <= limit
		if strict {
			ok = got < limit
		}
		verdict := "met"
		if !ok {
			verdict = "MISSED"
			missed = true
		}
		op := "≤"
		if strict {
			op = "<"
		}
		fmt.Printf("%-45s %10.2f   target %s %g: %s\n", what, got, op, limit, verdict)
	}
	t := median(times[*target])
	for _, b := range bases {
		what := fmt.Sprintf("time ratio %s ÷ %s", short(*target), short(b.name))
		if b.maxRatio == 0 {
			fmt.Printf("%-45s %10.2f   (no target)\n", what, t/median(times[b.name]))
			continue
		}
		check(what, t/median(times[b.name]), b.maxRatio, false)
	}
	if *maxAllocs > 0 {
		check("allocs/op "+short(*target), median(allocs[*target]), *maxAllocs, true)
	}
	if missed {
		os.Exit(1)
	}
}

// procSuffix is the -GOMAXPROCS suffix go test adds to benchmark names.
var procSuffix = regexp.MustCompile(`-\d+$`)

// read returns the sec/op and allocs/op of every run of every benchmark.
func read(path string) (times, allocs map[string][]float64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	times, allocs = map[string][]float64{}, map[string][]float64{}
	r := benchfmt.NewReader(f, path)
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		name := procSuffix.ReplaceAllString(res.Name.String(), "")
		if v, ok := res.Value("sec/op"); ok {
			times[name] = append(times[name], v)
		}
		if v, ok := res.Value("allocs/op"); ok {
			allocs[name] = append(allocs[name], v)
		}
	}
	return times, allocs, r.Err()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func short(name string) string {
	_, after, _ := strings.Cut(name, "/")
	if after == "" {
		return name
	}
	return after
}
