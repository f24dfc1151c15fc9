//go:build customer

package main

import "github.com/evalmeter/evalmeter/internal/cli"

// serverCommands: none in the customer's build, which carries no server,
// operator or Kubernetes code.
func serverCommands() []cli.Command { return nil }
