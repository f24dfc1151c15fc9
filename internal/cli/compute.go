package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// compute runs the metrics engine offline, as POST /api/svc/v1/metrics
// would, so that a customer can check a request and its digest.
func compute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compute", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: evalmeter compute [FILE]\n\nPrints the metrics of the request in FILE (standard input when absent),\nor its error envelope and exit status 1 when it would be refused.")
	}
	if status, ok := ParseFlags(fs, args); !ok {
		return status
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return 2
	}

	in, name := stdin, "standard input"
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "evalmeter compute: %v\n", err)
			return 2
		}
		defer f.Close()
		in, name = f, fs.Arg(0)
	}
	// Read one byte past the limit to tell "at the limit" from "over it".
	body, err := io.ReadAll(io.LimitReader(in, metrics.MaxBodyBytes+1))
	if err != nil {
		fmt.Fprintf(stderr, "evalmeter compute: reading %s: %v\n", name, err)
		return 2
	}

	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	m, merr := checkRequest(body)
	if merr != nil {
		return refuse(enc, merr)
	}
	if err := enc.Encode(m); err != nil {
		fmt.Fprintf(stderr, "evalmeter compute: %v\n", err)
		return 2
	}
	return 0
}

// refuse prints the error envelope (docs/design.md#32-error-envelope) and returns exit status 1.
func refuse(enc *json.Encoder, e *api.Error) int {
	if err := enc.Encode(struct {
		Error *api.Error `json:"error"`
	}{e}); err != nil {
		return 2
	}
	return 1
}
