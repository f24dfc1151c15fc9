package cli

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A gate is a threshold on one metric, e.g. status.pass_rate>=0.95: a CI job
// fails when the metric misses it.
type gate struct {
	expr  string
	path  []string
	op    string
	value float64
}

var gatePattern = regexp.MustCompile(`^\s*([a-z0-9_]+(?:\.[a-z0-9_]+)*)\s*(>=|<=|==|!=|>|<)\s*([-+0-9.eE]+)\s*$`)

func parseGate(expr string) (gate, error) {
	m := gatePattern.FindStringSubmatch(expr)
	if m == nil {
		return gate{}, fmt.Errorf("--gate %q: write METRIC OP NUMBER, e.g. status.pass_rate>=0.95 or latency_ms.p95<=2000 (OP: >= <= > < == !=)", expr)
	}
	v, err := strconv.ParseFloat(m[3], 64)
	if err != nil {
		return gate{}, fmt.Errorf("--gate %q: %q is not a number", expr, m[3])
	}
	return gate{expr: strings.TrimSpace(expr), path: strings.Split(m[1], "."), op: m[2], value: v}, nil
}

// gateFlags collects repeated --gate flags.
type gateFlags []gate

func (g *gateFlags) String() string { return "" }

func (g *gateFlags) Set(expr string) error {
	parsed, err := parseGate(expr)
	if err != nil {
		return err
	}
	*g = append(*g, parsed)
	return nil
}

// lookup returns the metric the gate names in a metrics result: a number,
// nil for a rate with no basis (null), or an error for a path that names no
// number.
func (g gate) lookup(m any) (*float64, error) {
	var v any
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	for _, name := range g.path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, g.noMetric()
		}
		if v, ok = obj[name]; !ok {
			return nil, g.noMetric()
		}
	}
	switch n := v.(type) {
	case float64:
		return &n, nil
	case nil:
		return nil, nil
	}
	return nil, g.noMetric()
}

func (g gate) noMetric() error {
	return fmt.Errorf("--gate %q: %s is not a numeric metric; use a path such as status.pass_rate, status.counts.fail, latency_ms.p95, tool_checks.pass_rate or cost_reported.total", g.expr, strings.Join(g.path, "."))
}

// check evaluates the gate on a metrics result. It returns a line for the
// user and whether the gate passed.
func (g gate) check(m any) (string, bool, error) {
	v, err := g.lookup(m)
	if err != nil {
		return "", false, err
	}
	if v == nil {
		return fmt.Sprintf("gate %s: FAIL (%s is null: no basis for it in this run)", g.expr, strings.Join(g.path, ".")), false, nil
	}
	var ok bool
	switch g.op {
	case ">=":
		ok = *v >= g.value
	case "<=":
		ok = *v <= g.value
	case ">":
		ok = *v > g.value
	case "<":
		ok = *v < g.value
	case "==":
		ok = *v == g.value
	case "!=":
		ok = *v != g.value
	}
	verdict := "pass"
	if !ok {
		verdict = "FAIL"
	}
	return fmt.Sprintf("gate %s: %s (%s = %s)", g.expr, verdict, strings.Join(g.path, "."), strconv.FormatFloat(*v, 'g', -1, 64)), ok, nil
}
