// Command evalmeter is the single binary of the evalmeter service. Each
// subcommand is one role: see usage.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/evalmeter/evalmeter/api"
)

const usage = `evalmeter: deterministic metrics for customer-run AI-agent evaluations.

Usage:
  evalmeter api [flags]      serve the API (see evalmeter api -h)
  evalmeter controller [flags]
                             run the operator: ClientAgreements to API keys and credits
  evalmeter migrate          apply the database migrations
  evalmeter clients grant --client-id ID --hours N [--valid-until RFC3339] [--rotate-key]
                             create or update a client in PostgreSQL; prints a new API key once
  evalmeter clients show --client-id ID
                             print a client's usage figures
  evalmeter clients events --client-id ID [--since DATE] [--output json|csv]
                             the client's allocations and sessions, for an audit
  evalmeter clients report --month YYYY-MM [--output json|csv]
                             per client: sessions and allocation change, for invoicing
  evalmeter receipt-keys --receipt-key-file FILE
                             print the JWK Set of the keys that sign receipts
  evalmeter compute [FILE]   compute the metrics of a request (FILE, or standard input)
  evalmeter schema           print the JSON Schema of the metrics request

For customers:
  evalmeter convert [--from FORMAT] FILE...
                             turn an eval tool's results into a metrics request
                             (FORMAT: junit, promptfoo, inspect, tau2, deepeval, swebench, lmeval, otel, auto)
  evalmeter submit --url BASE [--from FORMAT] [--gate EXPR]... [--save-result F] [--receipt F] [--dry-run] FILE...
                             convert, check locally and post through a session
  evalmeter compare [--from FORMAT] [--max-drop POINTS] BASELINE CANDIDATE
                             did the candidate run pass fewer cases than noise explains?
                             (paired, by case id; offline, no credit spent)
  evalmeter verify [--keys FILE] [--request FILE] RECEIPT
                             check a receipt of submit --receipt: who computed which
                             metrics, when, for whom, from which payload
  evalmeter usage --url BASE print the client's credits
  evalmeter version          print the version

Exit status: 0 on success, 1 when the request is refused (the error envelope
is printed), 2 when the command could not run, 3 when a gate of submit failed
or compare found a regression, 4 when compare --fail-on-inconclusive could
not rule out a drop.
`

// version is set at build time by make dist.
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "api":
		return serveAPI(args[1:], stderr)
	case "controller":
		return runController(args[1:], stderr)
	case "migrate":
		return migrate(args[1:], stderr)
	case "clients":
		return clients(args[1:], stdout, stderr)
	case "compute":
		return compute(args[1:], stdin, stdout, stderr)
	case "convert":
		return convertCmd(args[1:], stdout, stderr)
	case "submit":
		return submitCmd(args[1:], stdout, stderr)
	case "compare":
		return compareCmd(args[1:], stdout, stderr)
	case "verify":
		return verifyCmd(args[1:], stdout, stderr)
	case "receipt-keys":
		return receiptKeysCmd(args[1:], stdout, stderr)
	case "usage":
		return usageCmd(args[1:], stdout, stderr)
	case "schema":
		if len(args) > 1 {
			fmt.Fprintln(stderr, "Usage: evalmeter schema")
			return 2
		}
		stdout.Write(api.MetricsRequestSchema)
		return 0
	case "version", "--version":
		fmt.Fprintln(stdout, "evalmeter", version)
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "evalmeter: unknown command %q\n\n%s", args[0], usage)
	return 2
}
