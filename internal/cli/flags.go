package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
)

// EnvOr is the value of the environment variable name, or def: every flag
// of a long-running command falls back to the environment, as containers
// are configured.
func EnvOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// EnvBool is the environment variable name read as a boolean; false when unset or not one.
func EnvBool(name string) bool {
	v, _ := strconv.ParseBool(os.Getenv(name))
	return v
}

// NewFlagSet returns a flag set that reports errors on stderr with usage.
func NewFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: evalmeter %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// ParseFlags parses a command's flags. When the command must stop, ok is
// false and status is its exit status: 0 after -h or --help (the usage is
// printed), 2 after a flag that is wrong.
func ParseFlags(fs *flag.FlagSet, args []string) (status int, ok bool) {
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return 0, false
	case err != nil:
		return 2, false
	}
	return 0, true
}

// Failf prints a message for the user on stderr and returns exit status 2.
func Failf(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "evalmeter: "+format+"\n", args...)
	return 2
}
