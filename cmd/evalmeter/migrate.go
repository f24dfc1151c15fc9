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
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return 2
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
