// Command convertbench measures `evalmeter convert` on a large Inspect AI
// log, as a .json document and as an .eval zip (`make bench-convert`): its
// wall time and peak RSS, beside Python's json.load of the same file in the
// same run. The log is generated here, of the shape Inspect writes (long
// messages and events in each sample), from a fixed seed.
//
// It exits 1 when a target of issue 13 is missed: peak RSS under 64 MiB,
// and at least 10 times Python's speed.
package main

import (
	"archive/zip"
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

const (
	maxRSS   = 64 << 20 // bytes
	minSpeed = 10.0     // × Python
	samples  = 500      // what one request holds
)

func main() {
	size := flag.Int("size", 200, "size of the generated log in MB")
	bin := flag.String("evalmeter", "", "evalmeter binary (default: built from ./cmd/evalmeter)")
	runs := flag.Int("runs", 3, "runs of each command; the medians are reported")
	keep := flag.String("keep", "", "write the logs into this directory and keep them (for profiling)")
	flag.Parse()
	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "evalmeter-convertbench-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err)
	}
	if *bin == "" {
		*bin = filepath.Join(dir, "evalmeter")
		if out, err := exec.Command("go", "build", "-o", *bin, "./cmd/evalmeter").CombinedOutput(); err != nil {
			fail(fmt.Errorf("go build: %v\n%s", err, out))
		}
	}
	jsonLog, evalLog := filepath.Join(dir, "log.json"), filepath.Join(dir, "log.eval")
	if err := writeLogs(jsonLog, evalLog, *size<<20); err != nil {
		fail(err)
	}
	otelLog := filepath.Join(dir, "traces.jsonl")
	if err := writeTraces(otelLog, *size<<20); err != nil {
		fail(err)
	}

	python, _ := exec.LookPath("python3")
	missed := false
	// The binary's own floor: its code and data mapped at start, whatever it does.
	floor, err := measure(*runs, *bin, "version")
	if err != nil {
		fail(err)
	}
	fmt.Printf("evalmeter version, for the binary's floor: peak RSS %.0f MiB (anon %.0f)\n", mib(floor.rss), mib(floor.anon))
	fmt.Printf("%-6s %9s   %-35s %-28s %s\n", "log", "size", "evalmeter convert", "python3", "targets")
	for _, c := range []struct {
		name, path, script string
		args               []string
	}{
		{".json", jsonLog, "import json,sys; json.load(open(sys.argv[1]))", []string{"--from", "inspect"}},
		{".eval", evalLog, "import json,sys,zipfile\nz=zipfile.ZipFile(sys.argv[1])\nfor n in z.namelist(): json.loads(z.read(n))", []string{"--from", "inspect"}},
		{"otlp", otelLog, "import json,sys\nfor l in open(sys.argv[1]): json.loads(l)", []string{"--from", "otel", "--case-attribute", "case"}},
	} {
		fi, err := os.Stat(c.path)
		if err != nil {
			fail(err)
		}
		u, err := measure(*runs, *bin, append(append([]string{"convert"}, c.args...), c.path)...)
		if err != nil {
			fail(err)
		}
		wall, rss := u.wall, u.rss
		line := fmt.Sprintf("%-6s %6.0f MB   %5.2f s, peak RSS %2.0f MiB (anon %2.0f)   ", c.name, float64(fi.Size())/1e6, wall.Seconds(), mib(rss), mib(u.anon))
		verdict := func(ok bool) string {
			if ok {
				return "met"
			}
			missed = true
			return "MISSED"
		}
		targets := fmt.Sprintf("RSS < 64 MiB: %s", verdict(rss < maxRSS))
		if python == "" {
			line += fmt.Sprintf("%-28s ", "not measured: no python3")
		} else {
			py, err := measure(*runs, python, "-c", c.script, c.path)
			if err != nil {
				fail(err)
			}
			pyWall := py.wall
			speed := pyWall.Seconds() / wall.Seconds()
			line += fmt.Sprintf("%6.2f s (evalmeter %4.1f ×)   ", pyWall.Seconds(), speed)
			targets += fmt.Sprintf("; ≥ %g × python3: %s", minSpeed, verdict(speed >= minSpeed))
		}
		fmt.Println(line + targets)
	}
	if missed {
		os.Exit(1)
	}
}

// usage is what a command used: its median wall time, its largest peak RSS
// and, of that, the largest anonymous part seen (sampled from /proc), which
// leaves out the binary's own pages mapped from the page cache.
type usage struct {
	wall      time.Duration
	rss, anon int64
}

// measure runs the command runs times.
func measure(runs int, name string, args ...string) (usage, error) {
	var u usage
	var walls []time.Duration
	for range runs {
		cmd := exec.Command(name, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			return usage{}, err
		}
		done := make(chan struct{})
		sampled := make(chan int64)
		go func() { sampled <- sampleAnon(cmd.Process.Pid, done) }()
		err := cmd.Wait()
		walls = append(walls, time.Since(start))
		close(done)
		u.anon = max(u.anon, <-sampled)
		if err != nil {
			return usage{}, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			u.rss = max(u.rss, ru.Maxrss<<10) // KiB on Linux
		}
	}
	slices.Sort(walls)
	u.wall = walls[len(walls)/2]
	return u, nil
}

// sampleAnon returns the largest RssAnon of the process seen every 2 ms
// until done.
func sampleAnon(pid int, done <-chan struct{}) int64 {
	var peak int64
	path := fmt.Sprintf("/proc/%d/status", pid)
	for {
		if b, err := os.ReadFile(path); err == nil {
			for line := range strings.Lines(string(b)) {
				var kb int64
				if _, err := fmt.Sscanf(line, "RssAnon: %d kB", &kb); err == nil {
					peak = max(peak, kb<<10)
				}
			}
		}
		select {
		case <-done:
			return peak
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// writeLogs writes the same log of about size bytes as a .json document and
// as an .eval zip (deflated members), one sample at a time.
func writeLogs(jsonPath, evalPath string, size int) error {
	jf, err := os.Create(jsonPath)
	if err != nil {
		return err
	}
	defer jf.Close()
	jw := bufio.NewWriterSize(jf, 1<<20)
	ef, err := os.Create(evalPath)
	if err != nil {
		return err
	}
	defer ef.Close()
	zw := zip.NewWriter(ef)

	head := header()
	hb, err := json.Marshal(head)
	if err != nil {
		return err
	}
	if err := writeMember(zw, "header.json", hb); err != nil {
		return err
	}
	jw.Write(hb[:len(hb)-1])
	jw.WriteString(`,"samples":[`)
	rng := rand.New(rand.NewPCG(13, 13))
	for i := range samples {
		b, err := json.Marshal(sample(rng, i, size/samples))
		if err != nil {
			return err
		}
		if i > 0 {
			jw.WriteByte(',')
		}
		jw.Write(b)
		if err := writeMember(zw, fmt.Sprintf("samples/s%d_epoch_1.json", i), b); err != nil {
			return err
		}
	}
	jw.WriteString("]}")
	if err := jw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// writeTraces writes about size bytes of OTLP JSON lines, as the Collector's
// file exporter writes them: one trace a line, an agent span with its
// evaluation and model calls whose messages make most of the bytes.
func writeTraces(path string, size int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(17, 17))
	attr := func(k string, v any) map[string]any {
		if s, ok := v.(string); ok {
			return map[string]any{"key": k, "value": map[string]any{"stringValue": s}}
		}
		return map[string]any{"key": k, "value": map[string]any{"intValue": fmt.Sprint(v)}}
	}
	const start = 1764064800000000000
	for i, n := 0, 0; n < size && i < samples; i++ {
		trace := fmt.Sprintf("%032x", i+1)
		spans := []any{map[string]any{
			"traceId": trace, "spanId": "0000000000000001", "name": "invoke_agent", "kind": 1,
			"startTimeUnixNano": fmt.Sprint(start), "endTimeUnixNano": fmt.Sprint(start + 2_000_000_000),
			"attributes": []any{attr("gen_ai.operation.name", "invoke_agent"), attr("case", fmt.Sprintf("c%d", i))},
			"events": []any{map[string]any{"name": "gen_ai.evaluation.result", "attributes": []any{
				attr("gen_ai.evaluation.name", "correctness"), attr("gen_ai.evaluation.score.label", []string{"pass", "fail"}[i%2]),
				attr("gen_ai.evaluation.explanation", text(rng, 300))}}},
			"status": map[string]any{"code": 0},
		}}
		for k := 0; k*20600 < size/samples; k++ {
			spans = append(spans, map[string]any{
				"traceId": trace, "spanId": fmt.Sprintf("%016x", k+2), "parentSpanId": "0000000000000001", "name": "chat gpt-4o", "kind": 3,
				"startTimeUnixNano": fmt.Sprint(start), "endTimeUnixNano": fmt.Sprint(start + 500_000_000),
				"attributes": []any{attr("gen_ai.operation.name", "chat"), attr("gen_ai.usage.input_tokens", 1000), attr("gen_ai.usage.output_tokens", 100),
					attr("gen_ai.input.messages", text(rng, 10000)), attr("gen_ai.output.messages", text(rng, 10000))},
				"status": map[string]any{"code": 0},
			})
		}
		b, err := json.Marshal(map[string]any{"resourceSpans": []any{map[string]any{
			"resource":   map[string]any{"attributes": []any{attr("service.name", "agent")}},
			"scopeSpans": []any{map[string]any{"scope": map[string]any{"name": "bench"}, "spans": spans}},
		}}})
		if err != nil {
			return err
		}
		w.Write(append(b, '\n'))
		n += len(b) + 1
	}
	return w.Flush()
}

func writeMember(zw *zip.Writer, name string, b []byte) error {
	w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// header is the part of an EvalLog (version 2) before its samples.
func header() map[string]any {
	return map[string]any{
		"version": 2,
		"status":  "success",
		"eval": map[string]any{
			"run_id": "convertbench-run", "task": "long_agent_task", "task_id": "t1", "model": "openai/gpt-4o-mini",
			"created": "2026-11-23T09:00:00+00:00", "dataset": map[string]any{"name": "bench", "samples": samples},
			"config": map[string]any{"epochs": 1},
		},
		"plan": map[string]any{"name": "plan", "steps": []any{map[string]any{"solver": "generate", "params": map[string]any{}}}},
		"results": map[string]any{
			"total_samples": samples, "completed_samples": samples,
			"scores": []any{map[string]any{"name": "match", "scorer": "match", "metrics": map[string]any{
				"accuracy": map[string]any{"name": "accuracy", "value": 0.5}}}},
		},
		"stats": map[string]any{"started_at": "2026-11-23T09:00:00+00:00", "completed_at": "2026-11-23T10:00:00+00:00"},
	}
}

// sample is an EvalSample of about size bytes: most of it in the messages
// and the events' model inputs and outputs, as in an agent's transcript.
func sample(rng *rand.Rand, i, size int) map[string]any {
	var messages, events []any
	for n := 0; n < size; {
		msg := map[string]any{"id": fmt.Sprintf("m%d", len(messages)), "role": []string{"user", "assistant", "tool"}[rng.IntN(3)], "content": text(rng, 4000)}
		ev := map[string]any{
			"event": []string{"model", "tool", "state", "score"}[rng.IntN(4)], "timestamp": "2026-11-23T09:00:01+00:00",
			"input":  []any{map[string]any{"role": "user", "content": text(rng, 3000)}},
			"output": map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": text(rng, 3000)}}}},
		}
		messages, events = append(messages, msg), append(events, ev)
		n += 10300
	}
	return map[string]any{
		"id": fmt.Sprintf("s%d", i), "epoch": 1,
		"input": "task " + text(rng, 200), "target": "answer",
		"messages": messages, "events": events,
		"scores": map[string]any{"match": map[string]any{"value": []string{"C", "I"}[i%2], "answer": "x", "explanation": text(rng, 300)}},
		"model_usage": map[string]any{"openai/gpt-4o-mini": map[string]any{
			"input_tokens": 1000 + i, "output_tokens": 200 + i, "total_tokens": 1200 + 2*i}},
		"total_time": 12.5 + float64(i%7), "working_time": 10.25 + float64(i%5),
	}
}

// words of transcripts: code, quotes, newlines and non-ASCII, which JSON
// writers escape.
var words = []string{"the", "model", "called", "tool_call", "résumé", `"quoted"`, "line\nbreak", "tab\t", "{\"json\": 1}", "ünïcödé", "def f(x):", "return", "0.125", "-3"}

func text(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "convertbench:", err)
	os.Exit(2)
}
