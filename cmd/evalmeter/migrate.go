package main

import (
	"context"
	"io"
	"time"

	"github.com/evalmeter/evalmeter/internal/ledger"
)

func migrate(args []string, stderr io.Writer) int {
	fs := newFlagSet("migrate", "migrate [--database-url URL]", stderr)
	dbURL := fs.String("database-url", envOr("DATABASE_URL", ""), "PostgreSQL URL (env DATABASE_URL)")
	if status, ok := parseFlags(fs, args); !ok {
		return status
	}
	if fs.NArg() > 0 {
		return failf(stderr, "%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	if *dbURL == "" {
		return failf(stderr, "migrate: set DATABASE_URL or --database-url")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := ledger.Migrate(ctx, *dbURL); err != nil {
		return failf(stderr, "migrate: %v", err)
	}
	return 0
}
