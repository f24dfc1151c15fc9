package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// The failover test's checker (make test-e2e-ha, ha_test.go), kept apart so
// that make test can show it catches what it is there to catch
// (TestCheckLedger).

// op is one request of the failover test's load and what came back.
type op struct {
	kind       string // opKind*
	key        string // the Idempotency-Key
	attempt    int    // 1 for the first request with this key and kind
	start, end time.Time
	status     int    // 0: no HTTP response
	err        string // the transport error, when status is 0
	retryAfter string // the Retry-After header
	code       string // error.code of an error envelope
	sessionID  string // of a 201
	token      string // of a 201
	replay     bool   // idempotent_replay
}

const (
	opOpen    = "open"    // POST /sessions with the attempt's key
	opReplay  = "replay"  // POST /sessions again with a key that got a 201
	opMetrics = "metrics" // POST /metrics
)

// failed reports whether the request met the service unavailable: a 503, or
// no answer at all.
func (o op) failed() bool { return o.status == 503 || o.status == 0 }

// history is every request of the load, in the order they ended.
type history struct {
	mu  sync.Mutex
	ops []op
}

func (h *history) add(o op) {
	h.mu.Lock()
	h.ops = append(h.ops, o)
	h.mu.Unlock()
}

func (h *history) all() []op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// ledgerState is what the ledger holds for the test's client after the load,
// read from PostgreSQL.
type ledgerState struct {
	allocated, consumed int
	sessions            map[string]string // Idempotency-Key -> session id
	sessionEvents       int               // credit_events of kind session
	chargedSessions     int               // distinct session ids among them
	metricsKeys         map[string]bool   // metrics_requests' Idempotency-Keys
}

// fault is one fault injected during the load, from its start until the
// service was whole again.
type fault struct {
	name       string
	start, end time.Time
	// apiDown: requests may find no API pod to answer (connection refused,
	// reset or timed out) while it lasts.
	apiDown bool
	// promoted: when CloudNativePG reports the new primary promoted, for
	// failovers and switchovers.
	promoted time.Time
}

// checkLedger compares the client's record of the load with the ledger and
// returns every broken promise:
//   - every session acknowledged with a 201 exists, with the id (and every
//     201 for its key the same id and token);
//   - consumed_hours = the sessions = the session credit events, each
//     session charged once;
//   - sessions <= credits, and all credits spent when attempts exceed them;
//     every session charged is one the client was told of;
//   - every metrics request acknowledged with a 200 is recorded;
//   - no 500, ever: every failure is a 402, an enveloped 503 with
//     Retry-After, or no answer while an API pod was down.
//
// attempts is the number of distinct keys the client tried to open a
// session with.
func checkLedger(h []op, l ledgerState, attempts int, faults []fault) []string {
	// The ledger's broken promises first, then the requests': a lost session
	// also fails every later request that uses it.
	var problems, opProblems []string
	addf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	opf := func(format string, args ...any) { opProblems = append(opProblems, fmt.Sprintf(format, args...)) }

	acked := map[string]op{} // key -> its first 201
	refused := map[string]bool{}
	resolved := map[string]bool{}
	metricsAcked := map[string]bool{}
	for _, o := range h {
		switch {
		case o.status == 0:
			if !duringAPIFault(o, faults) {
				opf("%s %s (attempt %d) at %s: no answer (%s) while every API pod was up", o.kind, o.key, o.attempt, o.start.Format(time.TimeOnly), o.err)
			}
		case o.status == 503:
			if o.retryAfter == "" || o.code != "service_unavailable" {
				opf("%s %s: 503 with Retry-After %q and error.code %q, want a service_unavailable envelope with Retry-After", o.kind, o.key, o.retryAfter, o.code)
			}
		case o.status >= 500:
			opf("%s %s: %d (%s)", o.kind, o.key, o.status, o.code)
		case o.kind == opMetrics && o.status == 200:
			metricsAcked[o.key] = true
		case o.kind != opMetrics && o.status == 201:
			resolved[o.key] = true
			first, seen := acked[o.key]
			if !seen {
				acked[o.key] = o
			} else if o.sessionID != first.sessionID || o.token != first.token {
				opf("key %s: 201 with session %s, earlier %s (or another token)", o.key, o.sessionID, first.sessionID)
			}
		case o.kind == opOpen && o.status == 402 && o.code == "credits_exhausted":
			resolved[o.key] = true
			refused[o.key] = true
		default:
			opf("%s %s: unexpected %d (%s)", o.kind, o.key, o.status, o.code)
		}
	}

	for key := range refused {
		if _, ok := acked[key]; ok {
			addf("key %s: both a 201 and a 402", key)
		}
	}
	for _, key := range sortedKeys(acked) {
		switch id, ok := l.sessions[key]; {
		case !ok:
			addf("acknowledged session lost: key %s, session %s is not in the ledger", key, acked[key].sessionID)
		case id != acked[key].sessionID:
			addf("key %s: acknowledged session %s, the ledger has %s", key, acked[key].sessionID, id)
		}
	}
	for _, key := range sortedKeys(l.sessions) {
		if _, ok := acked[key]; !ok {
			addf("session %s (key %s) was charged but never acknowledged", l.sessions[key], key)
		}
	}
	problems = append(problems, chargeProblems(l)...)
	if len(resolved) != attempts {
		addf("%d of %d keys got a 201 or a 402; the others never did", len(resolved), attempts)
	} else if attempts > l.allocated && l.consumed != l.allocated {
		addf("%d attempts for %d credits, but %d consumed: want every credit spent", attempts, l.allocated, l.consumed)
	}
	for _, key := range sortedKeys(metricsAcked) {
		if !l.metricsKeys[key] {
			addf("acknowledged metrics request lost: key %s is not in the ledger", key)
		}
	}
	return append(problems, opProblems...)
}

// unanswered returns a problem for each key of an open or a metrics post
// whose last attempt failed: a 503 or no answer that the client, retrying,
// never got past. Replays are not retried, and are left out.
func unanswered(h []op) []string {
	last := map[string]op{}
	for _, o := range h {
		if o.kind == opReplay {
			continue
		}
		if prev, ok := last[o.kind+" "+o.key]; !ok || o.attempt >= prev.attempt {
			last[o.kind+" "+o.key] = o
		}
	}
	var problems []string
	for _, k := range sortedKeys(last) {
		if o := last[k]; o.failed() {
			problems = append(problems, fmt.Sprintf("%s %s: never answered: attempt %d, the last, got %d %s", o.kind, o.key, o.attempt, o.status, o.err))
		}
	}
	return problems
}

// chargeProblems: consumed_hours = the sessions = the session credit events,
// each session charged once, and no more than the credits allocated.
func chargeProblems(l ledgerState) []string {
	var problems []string
	if n := len(l.sessions); l.consumed != n || l.sessionEvents != n || l.chargedSessions != n {
		problems = append(problems, fmt.Sprintf("consumed_hours %d, sessions %d, session credit events %d for %d sessions: want all equal",
			l.consumed, n, l.sessionEvents, l.chargedSessions))
	}
	if l.consumed > l.allocated {
		problems = append(problems, fmt.Sprintf("over-spent: %d credits consumed of %d", l.consumed, l.allocated))
	}
	return problems
}

// checkRestore compares the client's record of the load with a ledger
// restored to the point in time target (make test-e2e-dr, dr_test.go), and
// returns every broken promise:
//   - every session acknowledged (its 201 received) before target is there,
//     with its id, and so is every metrics request acknowledged (200) before
//     target;
//   - nothing whose key was first tried after target is there;
//   - the charges add up (chargeProblems): no credit spent twice.
//
// A key in flight across target (tried before it, not acknowledged before it)
// may be there or not: its commit may fall on either side.
func checkRestore(h []op, l ledgerState, target time.Time) []string {
	var problems []string
	addf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	firstTried := map[string]time.Time{} // kind/key -> its first request's start
	ackedBefore := map[string]op{}       // kind/key -> its first acknowledgement, if before target
	sessionIDs := map[string]string{}    // key -> the id its 201s gave
	for _, o := range h {
		kind := o.kind
		if kind == opReplay {
			kind = opOpen // a replay's key was first tried by an open
		}
		id := kind + "/" + o.key
		if first, ok := firstTried[id]; !ok || o.start.Before(first) {
			firstTried[id] = o.start
		}
		acked := (kind == opOpen && o.status == 201) || (kind == opMetrics && o.status == 200)
		if !acked {
			continue
		}
		if kind == opOpen {
			sessionIDs[o.key] = o.sessionID
		}
		if first, ok := ackedBefore[id]; o.end.Before(target) && (!ok || o.end.Before(first.end)) {
			ackedBefore[id] = o
		}
	}

	for _, id := range sortedKeys(ackedBefore) {
		o := ackedBefore[id]
		switch sessionID, ok := l.sessions[o.key]; {
		case o.kind == opMetrics && !l.metricsKeys[o.key]:
			addf("metrics request acknowledged at %s, before the target %s, lost: key %s", o.end.Format(timeMicro), target.Format(timeMicro), o.key)
		case o.kind != opMetrics && !ok:
			addf("session acknowledged at %s, before the target %s, lost: key %s, session %s", o.end.Format(timeMicro), target.Format(timeMicro), o.key, o.sessionID)
		case o.kind != opMetrics && sessionID != o.sessionID:
			addf("key %s: acknowledged session %s, the restored ledger has %s", o.key, o.sessionID, sessionID)
		}
	}
	present := func(kind string, keys []string) {
		for _, key := range keys {
			first, tried := firstTried[kind+"/"+key]
			switch {
			case !tried:
				addf("%s key %s is in the restored ledger, but the client never sent it", kind, key)
			case first.After(target):
				addf("%s key %s, first tried at %s after the target %s, is in the restored ledger", kind, key, first.Format(timeMicro), target.Format(timeMicro))
			case kind == opOpen && sessionIDs[key] != "" && sessionIDs[key] != l.sessions[key]:
				addf("key %s: the restored ledger has session %s, the client was given %s", key, l.sessions[key], sessionIDs[key])
			}
		}
	}
	present(opOpen, sortedKeys(l.sessions))
	present(opMetrics, sortedKeys(l.metricsKeys))
	return append(problems, chargeProblems(l)...)
}

// timeMicro is how the checkers print times: to the microsecond, as
// PostgreSQL's commit timestamps are.
const timeMicro = "15:04:05.000000"

// recoveryPoint is the end of the last request acknowledged before target
// whose key the restored ledger holds: target minus it bounds the work the
// restore could have kept and did not see acknowledged.
func recoveryPoint(h []op, l ledgerState, target time.Time) time.Time {
	var last time.Time
	for _, o := range h {
		held := (o.kind == opMetrics && o.status == 200 && l.metricsKeys[o.key]) ||
			(o.kind != opMetrics && o.status == 201 && l.sessions[o.key] != "")
		if held && o.end.Before(target) && o.end.After(last) {
			last = o.end
		}
	}
	return last
}

func duringAPIFault(o op, faults []fault) bool {
	for _, f := range faults {
		if f.apiDown && o.end.After(f.start) && o.start.Before(f.end) {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// faultFigures are what one fault cost the clients.
type faultFigures struct {
	fault
	requests, failures int
	unavailable        int // 503s among the failures
	retries            int // requests that were not their key's first
	// window: from the start of the first failed request to the end of the
	// last, among requests started during the fault; 0 without failures.
	window time.Duration
	// firstFailure and lastFailure: when the window opened and closed,
	// after the fault's start.
	firstFailure, lastFailure time.Duration
}

// figures attributes each request started before until to the last fault
// that started before it (faults are in order): a fault's failures may
// outlast what Kubernetes reports of it.
func figures(h []op, faults []fault, until time.Time) []faultFigures {
	out := make([]faultFigures, len(faults))
	for i, f := range faults {
		out[i].fault = f
		end := until
		if i+1 < len(faults) {
			end = faults[i+1].start
		}
		var first, last time.Time
		for _, o := range h {
			if o.start.Before(f.start) || !o.start.Before(end) {
				continue
			}
			out[i].requests++
			if o.attempt > 1 {
				out[i].retries++
			}
			if !o.failed() {
				continue
			}
			out[i].failures++
			if o.status == 503 {
				out[i].unavailable++
			}
			if first.IsZero() || o.start.Before(first) {
				first = o.start
			}
			if o.end.After(last) {
				last = o.end
			}
		}
		if !first.IsZero() {
			out[i].window = last.Sub(first)
			out[i].firstFailure, out[i].lastFailure = first.Sub(f.start), last.Sub(f.start)
		}
	}
	return out
}

// summary is the figures' table, of the requests started before until.
func summary(h []op, faults []fault, until time.Time) string {
	var b strings.Builder
	var s503, s0, retries, maxAttempts int
	for _, o := range h {
		switch o.status {
		case 503:
			s503++
		case 0:
			s0++
		}
		if o.attempt > 1 {
			retries++
		}
		maxAttempts = max(maxAttempts, o.attempt)
	}
	fmt.Fprintf(&b, "requests %d, 503s %d, no answer %d, retries %d (at most %d attempts for one key)\n", len(h), s503, s0, retries, maxAttempts)
	fmt.Fprintf(&b, "%-48s %8s %8s %6s %7s %8s %15s %9s %9s\n", "fault", "requests", "failures", "503s", "retries", "window", "from/to (s)", "promoted", "whole")
	for _, f := range figures(h, faults, until) {
		promoted := "-"
		if !f.promoted.IsZero() {
			promoted = fmt.Sprintf("%.1fs", f.promoted.Sub(f.start).Seconds())
		}
		fmt.Fprintf(&b, "%-48s %8d %8d %6d %7d %7.1fs %7.1f/%-7.1f %9s %8.1fs\n", f.name, f.requests, f.failures,
			f.unavailable, f.retries, f.window.Seconds(), f.firstFailure.Seconds(), f.lastFailure.Seconds(), promoted, f.end.Sub(f.start).Seconds())
	}
	b.WriteString("from/to: the first failure's start and the last one's end after the fault; promoted: CloudNativePG's\n" +
		"currentPrimaryTimestamp after it; whole: every instance (or API pod) ready again.\n")
	return b.String()
}
