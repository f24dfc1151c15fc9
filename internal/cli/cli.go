// Package cli holds the evalmeter commands that customers run on their own
// machines and in CI: convert, submit, compare, verify, usage, compute and
// schema. They turn an eval tool's results into a metrics request that
// holds only numbers, enums and ids, post it through a session, and explain
// the answer (docs/customer.md). Nothing here imports the server, the
// ledger or Kubernetes: the customer's binary is built from this package
// alone (cmd/evalmeter, build tag customer).
package cli

import (
	"io"

	"github.com/evalmeter/evalmeter/api"
)

// Command is one subcommand of the evalmeter binary.
type Command struct {
	Name string
	// Help is its entry in the top-level help: the synopsis, then what it
	// does on indented lines.
	Help string
	Run  func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

// Commands are the customer's commands, in the order of the help.
func Commands() []Command {
	return []Command{
		{"convert", `convert [--from FORMAT] FILE...
                             turn an eval tool's results into a metrics request
                             (FORMAT: junit, promptfoo, inspect, tau2, deepeval, swebench, lmeval, otel, auto)`,
			withoutStdin(convertCmd)},
		{"submit", `submit --url BASE [--from FORMAT] [--gate EXPR]... [--save-result F] [--receipt F] [--dry-run] FILE...
                             convert, check locally and post through a session`,
			withoutStdin(submitCmd)},
		{"compare", `compare [--from FORMAT] [--max-drop POINTS] BASELINE CANDIDATE
                             did the candidate run pass fewer cases than noise explains?
                             (paired, by case id; offline, no credit spent)`,
			withoutStdin(compareCmd)},
		{"verify", `verify [--keys FILE] [--request FILE] RECEIPT
                             check a receipt of submit --receipt: who computed which
                             metrics, when, for whom, from which payload`,
			withoutStdin(verifyCmd)},
		{"usage", `usage --url BASE print the client's credits`, withoutStdin(usageCmd)},
		{"compute", `compute [FILE]   compute the metrics of a request (FILE, or standard input)`, compute},
		{"schema", `schema           print the JSON Schema of the metrics request`, schema},
	}
}

func withoutStdin(run func(args []string, stdout, stderr io.Writer) int) func([]string, io.Reader, io.Writer, io.Writer) int {
	return func(args []string, _ io.Reader, stdout, stderr io.Writer) int { return run(args, stdout, stderr) }
}

// schema is evalmeter schema.
func schema(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := NewFlagSet("schema", "schema", stderr)
	if status, ok := ParseFlags(fs, args); !ok {
		return status
	}
	if fs.NArg() > 0 {
		return Failf(stderr, "schema: unexpected argument %q", fs.Arg(0))
	}
	stdout.Write(api.MetricsRequestSchema)
	return 0
}
