package convert

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func otelPath(name string) string { return filepath.Join("testdata", "otel", name) }

// otelOpts names the fixtures' case, repeat group and expected steps attributes.
var otelOpts = Options{CaseAttribute: "eval.case_id", RepeatAttribute: "eval.task", ExpectedStepsAttribute: "eval.expected_steps"}

func TestOtel(t *testing.T) {
	threshold := 0.5
	withThreshold := otelOpts
	withThreshold.PassThreshold = &threshold
	steps := func(n int) *Trace { return &Trace{ExpectedSteps: 3, ObservedSteps: n} }
	tests := []struct {
		name     string
		paths    []string
		opts     Options
		want     []Case
		warnings []string
	}{{
		// GenAI conventions of v1.38 on: a trace cut across two lines; the agent
		// span's aggregate tokens are not counted beside its model calls'.
		name:  "GenAI v1.38, JSON lines",
		paths: []string{otelPath("genai-v1.38.jsonl")},
		opts:  otelOpts,
		want: []Case{
			{ID: "q1", RepeatGroup: "task-1", Status: Pass, LatencyMS: 2500, InputTokens: i64(150), OutputTokens: i64(30),
				ToolChecks: []ToolCheck{{Name: "get_weather", Passed: true}}, Trace: steps(3)},
			{ID: "q2", RepeatGroup: "task-2", Status: Fail, LatencyMS: 1000, InputTokens: i64(80), OutputTokens: i64(5),
				ToolChecks: []ToolCheck{{Name: "search_flights", Passed: false}}, Trace: steps(2)},
			{ID: "q3", RepeatGroup: "task-3", Status: Timeout, LatencyMS: 30000, Trace: steps(0)},
			{ID: "q4", RepeatGroup: "task-4", Status: Error, LatencyMS: 200, Trace: steps(0)},
			{ID: "q5", RepeatGroup: "task-5", Status: Error, LatencyMS: 300, Trace: steps(0)},
		},
		warnings: []string{"1 traces carry no evaluation result and did not fail; sent as error"},
	}, {
		// Before v1.27: prompt_tokens and completion_tokens; one document.
		name:  "GenAI v1.26, one document",
		paths: []string{otelPath("genai-v1.26.json")},
		opts:  otelOpts,
		want: []Case{
			{ID: "q1", RepeatGroup: "task-1", Status: Pass, LatencyMS: 1500, InputTokens: i64(120), OutputTokens: i64(40), Trace: steps(1)},
			{ID: "q2", RepeatGroup: "task-2", Status: Fail, LatencyMS: 800, InputTokens: i64(60), OutputTokens: i64(7), Trace: steps(1)},
		},
	}, {
		name:  "snake_case keys",
		paths: []string{otelPath("genai-snake.json")},
		opts:  Options{CaseAttribute: "eval.case_id"},
		want: []Case{
			{ID: "q1", Status: Pass, LatencyMS: 1500, InputTokens: i64(120), OutputTokens: i64(40)},
			{ID: "q2", Status: Fail, LatencyMS: 800, InputTokens: i64(60), OutputTokens: i64(7)},
		},
	}, {
		// OpenInference: a label decides; a score alone needs a threshold.
		name:  "OpenInference",
		paths: []string{otelPath("openinference.jsonl")},
		opts:  Options{CaseAttribute: "eval.case_id"},
		want: []Case{
			{ID: "q1", Status: Pass, LatencyMS: 4000, InputTokens: i64(700), OutputTokens: i64(55), Cost: f64(0.005),
				ToolChecks: []ToolCheck{{Name: "lookup_order", Passed: true}}},
			{ID: "q2", Status: Error, LatencyMS: 2000, InputTokens: i64(200), OutputTokens: i64(9)},
		},
		warnings: []string{"1 traces carry no evaluation result and did not fail; sent as error"},
	}, {
		name:  "OpenInference, --pass-threshold",
		paths: []string{otelPath("openinference.jsonl")},
		opts:  Options{CaseAttribute: "eval.case_id", PassThreshold: &threshold},
		want: []Case{
			{ID: "q1", Status: Pass, LatencyMS: 4000, InputTokens: i64(700), OutputTokens: i64(55), Cost: f64(0.005),
				ToolChecks: []ToolCheck{{Name: "lookup_order", Passed: true}}},
			{ID: "q2", Status: Fail, LatencyMS: 2000, InputTokens: i64(200), OutputTokens: i64(9)},
		},
	}, {
		// Without a case attribute, the trace id names the case.
		name:  "trace ids",
		paths: []string{otelPath("genai-v1.26.json")},
		want: []Case{
			{ID: "000000000000000000000000000000b1", Status: Pass, LatencyMS: 1500, InputTokens: i64(120), OutputTokens: i64(40)},
			{ID: "000000000000000000000000000000b2", Status: Fail, LatencyMS: 800, InputTokens: i64(60), OutputTokens: i64(7)},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkConversion(t, "otel", tc.paths, tc.opts, tc.want, tc.warnings)
		})
	}
}

// TestOtelRefused: traces none of which is scored are refused with what to do.
func TestOtelRefused(t *testing.T) {
	dir := t.TempDir()
	unscored := filepath.Join(dir, "unscored.jsonl")
	os.WriteFile(unscored, []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"aa","spanId":"01","startTimeUnixNano":"1","endTimeUnixNano":"2","status":{}}]}]}]}`+"\n"), 0o600)
	scores := filepath.Join(dir, "scores.jsonl")
	os.WriteFile(scores, []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"aa","spanId":"01","attributes":[{"key":"evaluations.0.evaluation.score","value":{"doubleValue":0.5}}]}]}]}]}`+"\n"), 0o600)
	for path, want := range map[string]string{
		unscored: "no trace carries an evaluation result",
		scores:   "give --pass-threshold T",
	} {
		_, err := Convert([]string{path}, Options{Format: "otel"})
		var unusable *UnusableError
		if !errors.As(err, &unusable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an UnusableError saying %q", filepath.Base(path), err, want)
		}
	}
	// OpenInference's costs are in USD.
	if _, err := Convert([]string{otelPath("openinference.jsonl")}, Options{Format: "otel", Currency: "EUR"}); err == nil || !strings.Contains(err.Error(), "convert them with --currency USD") {
		t.Errorf("costs in USD converted as EUR: %v", err)
	}
}

func TestOtelDetect(t *testing.T) {
	for _, name := range []string{"genai-v1.38.jsonl", "genai-v1.26.json", "genai-snake.json", "openinference.jsonl"} {
		if got, err := Detect(otelPath(name)); err != nil || got != "otel" {
			t.Errorf("Detect(%s) = %q, %v", name, got, err)
		}
	}
}

// TestOtelPrivate: the fixtures carry the marker in every content attribute
// (gen_ai.input.messages, gen_ai.output.messages, gen_ai.system_instructions,
// gen_ai.tool.call.arguments and .result, input.value, output.value,
// llm.input_messages.*, llm.output_messages.*, tool.parameters), in event
// attributes (messages, the evaluation's explanation), span names, status
// messages and the resource's and scope's attributes.
func TestOtelPrivate(t *testing.T) {
	for _, name := range []string{"genai-v1.38.jsonl", "genai-v1.26.json", "genai-snake.json", "openinference.jsonl"} {
		data, err := os.ReadFile(otelPath(name))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(data), secretMarker); n < 10 {
			t.Fatalf("%s has the marker %d times only", name, n)
		}
		checkPrivate(t, "otel", otelPath(name))
		// The marker as a case attribute's name is the customer's choice; as
		// another attribute's value it is never read.
		for _, attr := range []string{"gen_ai.input.messages", "input.value", "gen_ai.tool.call.result", "llm.input_messages.0.message.content"} {
			res, err := Convert([]string{otelPath(name)}, Options{Format: "otel", RepeatAttribute: attr})
			if err == nil {
				for _, c := range res.Request.Cases {
					if strings.Contains(c.RepeatGroup, secretMarker) {
						t.Errorf("%s: the content of %s, named as the repeat attribute, was sent", name, attr)
					}
				}
			}
		}
	}
}

func FuzzOtel(f *testing.F) {
	var paths []string
	for _, name := range []string{"genai-v1.38.jsonl", "genai-v1.26.json", "genai-snake.json", "openinference.jsonl"} {
		paths = append(paths, otelPath(name))
	}
	fuzzFiles(f, "otel", ".jsonl", paths)
}
