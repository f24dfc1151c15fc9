// Package admin holds the operator's commands that work on the ledger
// directly, for development and installs without Kubernetes, and for the
// audit: evalmeter clients grant, show, events and report. The controller
// makes the same ledger calls for ClientAgreements.
package admin

import (
	"io"

	"github.com/evalmeter/evalmeter/internal/cli"
)

// Commands are the operator's ledger commands, in the order of the help.
func Commands() []cli.Command {
	return []cli.Command{
		{Name: "clients", Help: `clients grant --client-id ID --hours N [--valid-until RFC3339] [--rotate-key]
                             create or update a client in PostgreSQL; prints a new API key once
  evalmeter clients show --client-id ID
                             print a client's usage figures
  evalmeter clients events --client-id ID [--since DATE] [--output json|csv]
                             the client's allocations and sessions, for an audit
  evalmeter clients report --month YYYY-MM [--output json|csv]
                             per client: sessions and allocation change, for invoicing`,
			Run: func(args []string, _ io.Reader, stdout, stderr io.Writer) int { return clients(args, stdout, stderr) }},
	}
}
