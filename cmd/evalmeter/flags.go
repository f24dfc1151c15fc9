package main

import (
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

// failf prints a message for the user on stderr and returns exit status 2.
func failf(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "evalmeter: "+format+"\n", args...)
	return 2
}
