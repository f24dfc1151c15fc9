package server

import (
	"sync"
	"time"

	"github.com/evalmeter/evalmeter/internal/ledger"
)

// maxMemoSessions bounds the session memo: about 200 bytes each.
const maxMemoSessions = 10000

// sessionMemo remembers the sessions this process has read from the
// ledger, so that POST /metrics costs one database round trip, its write.
// What it keeps never changes: a session's client, signing key and window.
// Whether the session is still live (not ended, its key not revoked) is
// never taken from it: the write checks that in its own statement
// (ledger.SaveMetrics), and a refusal is sent only after the ledger is asked
// again (postMetrics), so a revocation takes effect at once on every replica.
type sessionMemo struct {
	mu       sync.Mutex
	sessions map[string]ledger.Session // by session id
}

func newSessionMemo() *sessionMemo {
	return &sessionMemo{sessions: make(map[string]ledger.Session)}
}

// get returns the session with this id, if it is remembered and its window is
// still open at now.
func (c *sessionMemo) get(id string, now time.Time) (ledger.Session, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sess, ok := c.sessions[id]
	if ok && !now.Before(sess.ExpiresAt) {
		delete(c.sessions, id)
		return ledger.Session{}, false
	}
	return sess, ok
}

// put remembers a live session. When the memo is full, the expired sessions
// go, and if that is not enough, all of them: the next request of each
// reads the ledger again.
func (c *sessionMemo) put(sess ledger.Session, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= maxMemoSessions {
		for id, s := range c.sessions {
			if !now.Before(s.ExpiresAt) {
				delete(c.sessions, id)
			}
		}
		if len(c.sessions) >= maxMemoSessions {
			clear(c.sessions)
		}
	}
	c.sessions[sess.ID] = sess
}

// drop forgets a session that has ended.
func (c *sessionMemo) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sessions, id)
}
