package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestCheckLedger: the failover test's checker passes a consistent history
// and catches each way a ledger or an API can break its promises.
func TestCheckLedger(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	faults := []fault{
		{name: "failover", start: at(10), end: at(30)},
		{name: "API pods killed", start: at(40), end: at(50), apiDown: true},
	}
	// Two credits, three keys: a and b acknowledged (a after a 503 and a
	// retry, b replayed), c refused; one metrics request.
	good := func() ([]op, ledgerState) {
		return []op{
				{kind: opOpen, key: "a", attempt: 1, start: at(11), end: at(13), status: 503, retryAfter: "2", code: "service_unavailable"},
				{kind: opOpen, key: "a", attempt: 2, start: at(14), end: at(14.1), status: 201, sessionID: "sess_a", token: "tok_a"},
				{kind: opOpen, key: "b", attempt: 1, start: at(20), end: at(20.1), status: 201, sessionID: "sess_b", token: "tok_b"},
				{kind: opReplay, key: "b", attempt: 1, start: at(41), end: at(41.1), status: 0, err: "connection refused"},
				{kind: opReplay, key: "b", attempt: 1, start: at(42), end: at(42.1), status: 201, sessionID: "sess_b", token: "tok_b", replay: true},
				{kind: opOpen, key: "c", attempt: 1, start: at(21), end: at(21.1), status: 402, code: "credits_exhausted"},
				{kind: opMetrics, key: "m1", attempt: 1, start: at(22), end: at(22.1), status: 200},
			}, ledgerState{
				allocated: 2, consumed: 2, sessionEvents: 2, chargedSessions: 2,
				sessions:    map[string]string{"a": "sess_a", "b": "sess_b"},
				metricsKeys: map[string]bool{"m1": true},
			}
	}
	for _, c := range []struct {
		name   string
		mutate func(h []op, l *ledgerState) []op
		want   string // in a problem; empty: none
	}{
		{name: "consistent", mutate: func(h []op, _ *ledgerState) []op { return h }},
		{name: "acknowledged session lost", want: "acknowledged session lost: key b",
			mutate: func(h []op, l *ledgerState) []op {
				delete(l.sessions, "b")
				l.consumed, l.sessionEvents, l.chargedSessions = 1, 1, 1
				return h
			}},
		{name: "another session for the key", want: "key a: acknowledged session sess_a, the ledger has sess_x",
			mutate: func(h []op, l *ledgerState) []op { l.sessions["a"] = "sess_x"; return h }},
		{name: "replay with another token", want: "key b: 201 with session sess_b, earlier sess_b (or another token)",
			mutate: func(h []op, _ *ledgerState) []op { h[4].token = "tok_other"; return h }},
		{name: "charged twice", want: "consumed_hours 3, sessions 2, session credit events 3",
			mutate: func(h []op, l *ledgerState) []op { l.consumed, l.sessionEvents = 3, 3; return h }},
		{name: "charged, never acknowledged", want: "session sess_c (key c) was charged but never acknowledged",
			mutate: func(h []op, l *ledgerState) []op {
				l.sessions["c"] = "sess_c"
				l.allocated, l.consumed, l.sessionEvents, l.chargedSessions = 3, 3, 3, 3
				return h
			}},
		{name: "over-spent", want: "over-spent: 2 credits consumed of 1",
			mutate: func(h []op, l *ledgerState) []op { l.allocated = 1; return h }},
		{name: "a credit left unspent", want: "3 attempts for 2 credits, but 1 consumed",
			mutate: func(h []op, l *ledgerState) []op {
				h[2].status, h[2].code = 402, "credits_exhausted"
				h[4].status, h[4].code = 402, "credits_exhausted"
				delete(l.sessions, "b")
				l.consumed, l.sessionEvents, l.chargedSessions = 1, 1, 1
				return h
			}},
		{name: "a key never resolved", want: "2 of 3 keys got a 201 or a 402",
			mutate: func(h []op, _ *ledgerState) []op {
				h[5].status, h[5].retryAfter, h[5].code = 503, "2", "service_unavailable"
				return h
			}},
		{name: "500", want: "open a: 500 (internal_error)",
			mutate: func(h []op, _ *ledgerState) []op { h[0].status, h[0].code = 500, "internal_error"; return h }},
		{name: "503 without Retry-After", want: "503 with Retry-After \"\"",
			mutate: func(h []op, _ *ledgerState) []op { h[0].retryAfter = ""; return h }},
		{name: "no answer while the API was up", want: "no answer (connection refused) while every API pod was up",
			mutate: func(h []op, _ *ledgerState) []op { h[3].start, h[3].end = at(35), at(35.1); return h }},
		{name: "201 then 402", want: "key b: both a 201 and a 402",
			mutate: func(h []op, _ *ledgerState) []op {
				return append(h, op{kind: opOpen, key: "b", attempt: 2, start: at(25), end: at(25.1), status: 402, code: "credits_exhausted"})
			}},
		{name: "metrics lost", want: "acknowledged metrics request lost: key m1",
			mutate: func(h []op, l *ledgerState) []op { delete(l.metricsKeys, "m1"); return h }},
		{name: "unexpected status", want: "metrics m1: unexpected 409",
			mutate: func(h []op, _ *ledgerState) []op { h[6].status, h[6].code = 409, "idempotency_key_reused"; return h }},
	} {
		h, l := good()
		problems := checkLedger(c.mutate(h, &l), l, 3, faults)
		wantProblem(t, c.name, problems, c.want)
	}

	h, _ := good()
	if p := unanswered(h); len(p) != 0 {
		t.Errorf("unanswered of a history whose every key was answered: %q", p)
	}
	h = append(h, op{kind: opMetrics, key: "m2", attempt: 1, start: at(23), status: 503, code: "service_unavailable"},
		op{kind: opMetrics, key: "m2", attempt: 2, start: at(24), status: 0, err: "timeout"})
	if p := unanswered(h); len(p) != 1 || !strings.HasPrefix(p[0], "metrics m2: never answered: attempt 2") {
		t.Errorf("unanswered of a metrics key whose retries all failed: %q", p)
	}
	h, _ = good()
	f := figures(h, faults, at(60))
	if f[0].requests != 5 || f[0].failures != 1 || f[0].unavailable != 1 || f[0].retries != 1 || f[0].window != 2*time.Second ||
		f[1].requests != 2 || f[1].failures != 1 || f[1].unavailable != 0 || f[1].window != 100*time.Millisecond {
		t.Errorf("figures = %+v", f)
	}
}

// TestCheckRestore: the restore drill's checker passes a ledger restored to
// the target, whichever way the requests in flight across it went, and
// catches what was acknowledged before it and lost, what was first tried
// after it and kept, and double charges.
func TestCheckRestore(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	target := at(10)
	// a acknowledged before the target (after a 503), b in flight across it,
	// c tried after it; m1 acknowledged before, m2 after.
	history := []op{
		{kind: opOpen, key: "a", attempt: 1, start: at(1), end: at(1.5), status: 503, retryAfter: "2", code: "service_unavailable"},
		{kind: opOpen, key: "a", attempt: 2, start: at(2), end: at(2.1), status: 201, sessionID: "sess_a"},
		{kind: opMetrics, key: "m1", attempt: 1, start: at(3), end: at(3.1), status: 200},
		{kind: opOpen, key: "b", attempt: 1, start: at(9.9), end: at(10.2), status: 201, sessionID: "sess_b"},
		{kind: opReplay, key: "a", attempt: 1, start: at(11), end: at(11.1), status: 201, sessionID: "sess_a", replay: true},
		{kind: opOpen, key: "c", attempt: 1, start: at(12), end: at(12.1), status: 201, sessionID: "sess_c"},
		{kind: opMetrics, key: "m2", attempt: 1, start: at(13), end: at(13.1), status: 200},
	}
	ledger := func(sessions ...string) ledgerState {
		l := ledgerState{allocated: 10, sessions: map[string]string{}, metricsKeys: map[string]bool{"m1": true}}
		for _, key := range sessions {
			l.sessions[key] = "sess_" + key
		}
		l.consumed, l.sessionEvents, l.chargedSessions = len(sessions), len(sessions), len(sessions)
		return l
	}
	for _, c := range []struct {
		name   string
		ledger ledgerState
		want   string // in a problem; empty: none
	}{
		{name: "restored to the target, b's commit before it", ledger: ledger("a", "b")},
		{name: "restored to the target, b's commit after it", ledger: ledger("a")},
		{name: "a session acknowledged before the target lost", ledger: ledger("b"),
			want: "session acknowledged at 08:00:02.100000, before the target 08:00:10.000000, lost: key a, session sess_a"},
		{name: "a metrics request acknowledged before the target lost",
			ledger: func() ledgerState { l := ledger("a"); delete(l.metricsKeys, "m1"); return l }(),
			want:   "metrics request acknowledged at 08:00:03.100000, before the target 08:00:10.000000, lost: key m1"},
		{name: "a session first tried after the target kept", ledger: ledger("a", "c"),
			want: "open key c, first tried at 08:00:12.000000 after the target 08:00:10.000000, is in the restored ledger"},
		{name: "a metrics request first tried after the target kept",
			ledger: func() ledgerState { l := ledger("a"); l.metricsKeys["m2"] = true; return l }(),
			want:   "metrics key m2, first tried at 08:00:13.000000"},
		{name: "another session for the key",
			ledger: func() ledgerState { l := ledger("a"); l.sessions["a"] = "sess_x"; return l }(),
			want:   "key a: acknowledged session sess_a, the restored ledger has sess_x"},
		{name: "a key the client never sent",
			ledger: func() ledgerState { l := ledger("a", "z"); return l }(),
			want:   "open key z is in the restored ledger, but the client never sent it"},
		{name: "charged twice",
			ledger: func() ledgerState { l := ledger("a"); l.consumed, l.sessionEvents = 2, 2; return l }(),
			want:   "consumed_hours 2, sessions 1, session credit events 2 for 1 sessions"},
		{name: "everything deleted (the mutation check)",
			ledger: ledgerState{allocated: 10, sessions: map[string]string{}, metricsKeys: map[string]bool{}},
			want:   "lost: key a"},
	} {
		problems := checkRestore(history, c.ledger, target)
		wantProblem(t, c.name, problems, c.want)
	}
	if got := recoveryPoint(history, ledger("a", "b"), target); !got.Equal(at(3.1)) {
		t.Errorf("recoveryPoint = %s, want m1's acknowledgement at %s", got, at(3.1))
	}
}

// wantProblem fails the test unless problems has one containing want, or
// none when want is empty.
func wantProblem(t *testing.T, name string, problems []string, want string) {
	t.Helper()
	joined := strings.Join(problems, "\n")
	switch {
	case want == "" && len(problems) > 0:
		t.Errorf("%s: problems:\n%s", name, joined)
	case want != "" && !strings.Contains(joined, want):
		t.Errorf("%s: problems:\n%s\nwant one with %q", name, joined, want)
	}
}
