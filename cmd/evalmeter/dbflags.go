//go:build !customer

package main

import (
	"fmt"
	"strconv"
)

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
