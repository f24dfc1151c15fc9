//go:build !customer

package main

import (
	"context"
	"io"
	"time"

	"github.com/evalmeter/evalmeter/internal/cli"
	"github.com/evalmeter/evalmeter/internal/ledger"
)

func migrate(args []string, stderr io.Writer) int {
	fs := cli.NewFlagSet("migrate", "migrate [--database-url URL]", stderr)
	dbURL := fs.String("database-url", cli.EnvOr("DATABASE_URL", ""), "PostgreSQL URL (env DATABASE_URL)")
	if status, ok := cli.ParseFlags(fs, args); !ok {
		return status
	}
	if fs.NArg() > 0 {
		return cli.Failf(stderr, "%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	if *dbURL == "" {
		return cli.Failf(stderr, "migrate: set DATABASE_URL or --database-url")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := ledger.Migrate(ctx, *dbURL); err != nil {
		return cli.Failf(stderr, "migrate: %v", err)
	}
	return 0
}
