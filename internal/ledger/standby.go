package ledger

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// awaitStandbys returns once the synchronous standbys have every commit
// seen so far. A replay answers with what an earlier request committed, and
// a refusal from what others spent; those commits may be on the primary
// alone: a writer whose bound ended while its COMMIT waited for the standbys
// is cancelled by pgx as it drops the connection, and PostgreSQL then keeps
// the commit, visible, without their confirmation. Acknowledged, a failover
// could lose it.
//
// The transactional message goes to the WAL with a transaction ID, which is
// what makes a commit wait (an ID alone does not: PostgreSQL waits only for
// a commit that wrote WAL), and since the WAL is ordered, the wait covers
// every earlier commit. It takes no lock. Without synchronous replication
// nothing waits. Any role may call it (PostgreSQL grants it to PUBLIC; a
// server that revokes it refuses every replay). The transaction is
// read-write, which a server in recovery (a primary just demoted) refuses
// with 25006, unavailable; the message itself would fail there with an
// internal error. TestReplaysWaitForStandbys shows the wait.
func (s *Store) awaitStandbys(ctx context.Context) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadWrite}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(true, 'evalmeter', 'replay')`)
		return err
	})
}
