package ledger

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrNotFound is a client, key or session that does not exist (or, for
	// a key, is revoked).
	ErrNotFound = errors.New("not found")
	// ErrNoCredit is a session refused because no credit remains.
	ErrNoCredit = errors.New("no evaluation-hour credit remains")
	// ErrInvalid is a request the ledger refuses before asking PostgreSQL.
	ErrInvalid = errors.New("invalid")
)

// Unavailable reports whether err means PostgreSQL cannot serve the
// statement now, for a reason that passes without a change to evalmeter, so
// that the API answers 503 with Retry-After. Everything else a statement
// can fail with is a bug (a 500): a query PostgreSQL refuses as written, a
// constraint it violates, an error no network or server explains.
//
// Unavailable:
//   - no answer: the connection could not be made or was lost (a
//     pgconn.ConnectError, a net.Error, io.EOF, io.ErrUnexpectedEOF, an
//     error pgconn says happened before anything was sent), or the statement
//     outlived its bound (context.DeadlineExceeded);
//   - an answer that says "not now", by SQLSTATE (sqlStates below).
//
// Not unavailable: nil, the ledger's own answers (ErrNotFound, ErrNoCredit,
// ErrInvalid, pgx.ErrNoRows) and context.Canceled, which means the caller
// gave up: a client that went away is neither an outage nor a bug.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrNoCredit) ||
		errors.Is(err, ErrInvalid) || errors.Is(err, pgx.ErrNoRows) ||
		errors.Is(err, context.Canceled) {
		return false
	}
	// The server's own answer decides, even when it came while connecting:
	// a ConnectError wraps the PgError of a refused login.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return transientState(pgErr.Code)
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) ||
		errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}

// transientState reports whether a SQLSTATE says "not now" rather than
// "never": https://www.postgresql.org/docs/current/errcodes-appendix.html.
func transientState(code string) bool {
	if sqlStates[code] {
		return true
	}
	return len(code) == 5 && sqlStateClasses[code[:2]]
}

// sqlStateClasses are the classes every condition of which is transient.
var sqlStateClasses = map[string]bool{
	"08": true, // connection exception: the connection failed or was refused
	"53": true, // insufficient resources: 53300 too_many_connections, disk full, out of memory
	"57": true, // operator intervention: 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now, 57014 query_canceled (statement_timeout)
	"58": true, // system error: I/O error on the server
}

// sqlStates are the transient conditions of classes that also hold bugs.
var sqlStates = map[string]bool{
	"25006": true, // read_only_sql_transaction: a standby, or a primary demoted by a failover
	"40001": true, // serialization_failure
	"40P01": true, // deadlock_detected
	"40003": true, // statement_completion_unknown: the connection dropped at commit
	"55P03": true, // lock_not_available: lock_timeout
	"28P01": true, // invalid_password: the password is being rotated
	"28000": true, // invalid_authorization_specification: pg_hba.conf or role being changed
}

// unreachable reports whether Migrate waits err out: PostgreSQL is not
// there yet, starting, or busy. A refused login (class 28) ends Migrate at
// once: the 503 of the API lets a rotation finish, but a migration that
// waited minutes for it would hide a wrong user or password.
func unreachable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "28") {
		return false
	}
	return Unavailable(err)
}
