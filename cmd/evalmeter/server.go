//go:build !customer

package main

import (
	"io"

	"github.com/evalmeter/evalmeter/internal/admin"
	"github.com/evalmeter/evalmeter/internal/cli"
)

// serverCommands are the roles of the service's image and the operator's
// commands. The customer's build leaves them out (server_customer.go).
func serverCommands() []cli.Command {
	return append([]cli.Command{
		{Name: "api", Help: "api [flags]      serve the API (see evalmeter api -h)",
			Run: func(args []string, _ io.Reader, _, stderr io.Writer) int { return serveAPI(args, stderr) }},
		{Name: "controller", Help: `controller [flags]
                             run the operator: ClientAgreements to API keys and credits`,
			Run: func(args []string, _ io.Reader, _, stderr io.Writer) int { return runController(args, stderr) }},
		{Name: "migrate", Help: "migrate          apply the database migrations",
			Run: func(args []string, _ io.Reader, _, stderr io.Writer) int { return migrate(args, stderr) }},
		{Name: "receipt-keys", Help: `receipt-keys --receipt-key-file FILE
                             print the JWK Set of the keys that sign receipts`,
			Run: func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
				return receiptKeysCmd(args, stdout, stderr)
			}},
	}, admin.Commands()...)
}
