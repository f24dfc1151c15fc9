package ledger

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestUnreachable: what Migrate waits out (PostgreSQL not answering, or
// starting) and what it reports at once (a refused login, a bug).
func TestUnreachable(t *testing.T) {
	pgErr := func(code string) error { return &pgconn.PgError{Code: code} }
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
		{"starting up (57P03)", fmt.Errorf("connect: %w", pgErr("57P03")), true},
		{"deadline", context.DeadlineExceeded, true},
		{"unknown role (28000)", pgErr("28000"), false},
		{"wrong password (28P01)", pgErr("28P01"), false},
		{"too many connections (53300)", pgErr("53300"), true},
		{"syntax error (42601)", pgErr("42601"), false},
		{"canceled", context.Canceled, false},
		{"a plain error", errors.New("boom"), false},
	}
	for _, tt := range tests {
		if got := unreachable(tt.err); got != tt.want {
			t.Errorf("%s: unreachable(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}
