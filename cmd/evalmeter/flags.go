package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
)

// envOr is the value of the environment variable name, or def: every flag
// of a long-running command falls back to the environment, as containers
// are configured.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envBool(name string) bool {
	v, _ := strconv.ParseBool(os.Getenv(name))
	return v
}

// newFlagSet returns a flag set that reports errors on stderr with usage.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: evalmeter %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses a command's flags. When the command must stop, ok is
// false and status is its exit status: 0 after -h or --help (the usage is
// printed), 2 after a flag that is wrong.
func parseFlags(fs *flag.FlagSet, args []string) (status int, ok bool) {
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return 0, false
	case err != nil:
		return 2, false
	}
	return 0, true
}

// failf prints a message for the user on stderr and returns exit status 2.
func failf(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "evalmeter: "+format+"\n", args...)
	return 2
}

// maxConnsUsage documents --db-max-conns, shared by the API and the controller.
const maxConnsUsage = "most PostgreSQL connections of this process; keep replicas × this under max_connections; 0 for pgx's default (env EVALMETER_DB_MAX_CONNS)"

// parseMaxConns reads --db-max-conns.
func parseMaxConns(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--db-max-conns %q: use a whole number of connections, 0 for pgx's default", s)
	}
	return int32(n), nil
}
