// Command evalmeter is evalmeter's one binary. Each subcommand is one role:
// the customer's commands (internal/cli), and, unless it is built with the
// tag customer, the server's roles and the operator's commands. make dist
// builds the customer's binary with the tag; the image holds the full one.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/evalmeter/evalmeter/internal/cli"
)

const usageHead = `evalmeter: deterministic metrics for customer-run AI-agent evaluations.

Usage:
`

const usageTail = `  evalmeter version          print the version

Exit status: 0 on success, 1 when the request is refused (the error envelope
is printed), 2 when the command could not run, 3 when a gate of submit failed
or compare found a regression, 4 when compare --fail-on-inconclusive could
not rule out a drop.
`

// version and commit are set at build time (-X main.version=...), by make
// dist and make image from go run ./hack/release version. Without them, the
// commit is Go's VCS stamp of the build, where it has one.
var (
	version = "dev"
	commit  = ""
)

// versionLine is what evalmeter version prints: the release, the commit it
// was built from (with +dirty for uncommitted changes) and the Go toolchain.
func versionLine() string {
	c, dirty := commit, false
	if info, ok := debug.ReadBuildInfo(); ok && c == "" {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				c = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if c == "" {
		c = "unknown"
	} else if dirty {
		c += "+dirty"
	}
	return fmt.Sprintf("evalmeter %s (commit %s, %s)", version, c, runtime.Version())
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// commands are the subcommands this build has, server roles first.
func commands() []cli.Command {
	return append(serverCommands(), cli.Commands()...)
}

// usage is the top-level help: every command of this build.
func usage() string {
	var b strings.Builder
	b.WriteString(usageHead)
	server := len(serverCommands())
	for i, c := range commands() {
		if i == server && server > 0 {
			b.WriteString("\nFor customers:\n")
		}
		b.WriteString("  evalmeter " + c.Help + "\n")
	}
	b.WriteString(usageTail)
	return b.String()
}

// run dispatches to a subcommand and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	for _, c := range commands() {
		if c.Name == args[0] {
			return c.Run(args[1:], stdin, stdout, stderr)
		}
	}
	switch args[0] {
	case "version", "--version":
		fmt.Fprintln(stdout, versionLine())
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage())
		return 0
	}
	fmt.Fprintf(stderr, "evalmeter: unknown command %q\n\n%s", args[0], usage())
	return 2
}
