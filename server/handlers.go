package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/metrics"
)

// Each handler checks in the order of docs/design.md#52-the-order-of-checks: credential (401),
// agreement (403), query (400), Idempotency-Key (400), Content-Type (415),
// size (413), JSON (400), schema (422), then credits (402) or the
// idempotency conflict (409).

func (s *Server) getSchema(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.clientByKey(r); err != nil {
		return err
	}
	if err := noQueryNoBody(r); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.schema)
	return nil
}

func (s *Server) getUsage(w http.ResponseWriter, r *http.Request) error {
	client, err := s.clientByKey(r)
	if err != nil {
		return err
	}
	if err := noQueryNoBody(r); err != nil {
		return err
	}
	u, err := s.ledger.Usage(r.Context(), client.ID, s.now())
	if err != nil {
		return err
	}
	// The usage body is closed (docs/design.md#35-usage): the warning travels in a header.
	if u.LowCredit() {
		w.Header().Set(api.HeaderLowCredit, fmt.Sprintf("remaining=%d, threshold=%d", u.RemainingHours, *u.LowCreditThreshold))
	}
	return respond(w, http.StatusOK, api.UsageEnvelope{Usage: api.Usage{
		ClientID:       u.ClientID,
		AllocatedHours: u.AllocatedHours,
		ConsumedHours:  u.ConsumedHours,
		RemainingHours: u.RemainingHours,
		ActiveSessions: u.ActiveSessions,
		Metering: "One evaluation-hour credit per session. Each session opens one consecutive 60-minute " +
			"access window from its creation; idle time counts and the window cannot be paused.",
	}})
}

func (s *Server) openSession(w http.ResponseWriter, r *http.Request) error {
	client, err := s.clientByKey(r)
	if err != nil {
		return err
	}
	if err := noQuery(r); err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	if err := noBody(r); err != nil {
		return err
	}

	id, err := credential.NewSessionID(s.random)
	if err != nil {
		return err
	}
	// PostgreSQL keeps microseconds: a replay must show the same times.
	now := s.now().UTC().Truncate(time.Microsecond)
	sess, replay, err := s.ledger.OpenSession(r.Context(), key, ledger.Session{
		ID:         id,
		ClientID:   client.ID,
		IssuedAt:   now,
		ExpiresAt:  now.Add(AccessWindow),
		TokenKeyID: s.tokens.CurrentKeyID(),
		Key:        client.Key,
	}, "api")
	if errors.Is(err, ledger.ErrNoCredit) {
		return newError(api.CodeCreditsExhausted,
			fmt.Sprintf("client %s has no evaluation-hour credit left (%d of %d used); ask your operator for more", client.ID, client.ConsumedHours, client.AllocatedHours))
	}
	if errors.Is(err, ledger.ErrKeyUnusable) { // revoked since clientByKey
		return unauthorized("the API key is not valid or has been revoked", true)
	}
	if err != nil {
		return err
	}
	token, err := s.tokens.Token(sess.ID, sess.TokenKeyID)
	if err != nil {
		s.log.Error("session token key missing", "session_id", sess.ID, "error", err)
		return unavailable("this session's token key is not configured on this server")
	}
	if replay {
		s.telemetry.replays.WithLabelValues("sessions").Inc()
	} else {
		s.telemetry.sessionsOpened.Inc()
	}
	requestInfoFrom(r).sessionID = sess.ID
	return respond(w, http.StatusCreated, api.SessionEnvelope{Session: api.Session{
		ID:                  sess.ID,
		Token:               token,
		IssuedAt:            sess.IssuedAt.UTC(),
		ExpiresAt:           sess.ExpiresAt.UTC(),
		AccessWindowMinutes: int(AccessWindow / time.Minute),
		HoursConsumed:       1,
	}, IdempotentReplay: replay})
}

func (s *Server) postMetrics(w http.ResponseWriter, r *http.Request) error {
	sess, cached, err := s.session(r)
	if err != nil {
		return err
	}
	err = s.recordMetrics(w, r, sess)
	var refusal *apiError
	if cached && errors.As(err, &refusal) && refusal.status() != http.StatusUnauthorized {
		// Checks run in order, 401 first (docs/design.md#52-the-order-of-checks): a session that
		// ended since it was cached must get its 401, not this refusal.
		if _, err := s.liveSession(r, sess.ID); err != nil {
			return err
		}
	}
	return err
}

// recordMetrics is POST /metrics after the session: the request checks, the
// engine and the record.
func (s *Server) recordMetrics(w http.ResponseWriter, r *http.Request, sess ledger.Session) error {
	if err := noQuery(r); err != nil {
		return err
	}
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	if err := jsonContent(r); err != nil {
		return err
	}
	buf := s.bodies.Get().(*[]byte)
	defer s.bodies.Put(buf) // nothing of the body outlives this call
	body, err := readBody(w, r, *buf)
	if err != nil {
		return err
	}
	meter := s.meters.Get().(*metrics.Meter)
	defer s.meters.Put(meter) // req is meter's: nothing of it outlives this call
	req, err := meter.Parse(body)
	var merr *api.Error
	if errors.As(err, &merr) {
		return engineError(merr)
	}
	if err != nil {
		return err
	}
	m := req.Metrics()
	result, err := json.Marshal(m)
	if err != nil {
		return err
	}
	digest := req.Digest()
	recorded, stored, err := s.ledger.SaveMetrics(r.Context(), sess, key,
		ledger.MetricsRecord{RequestSHA256: digest, Metrics: result}, s.now())
	if errors.Is(err, ledger.ErrSessionEnded) {
		s.sessions.drop(sess.ID)
		return sessionEnded()
	}
	if err != nil {
		return err
	}
	if !stored && recorded.RequestSHA256 != digest {
		return newError(api.CodeIdempotencyKeyReused,
			"this Idempotency-Key was used with a different request; use a new key for a new request")
	}
	if !stored {
		s.telemetry.replays.WithLabelValues("metrics").Inc()
	}
	// The stored result is replayed byte for byte.
	out := make([]byte, 0, len(recorded.Metrics)+48)
	out = append(out, `{"metrics":`...)
	out = append(out, recorded.Metrics...)
	out = append(out, `,"idempotent_replay":`...)
	out = strconv.AppendBool(out, !stored)
	out = append(out, '}')
	s.signReceipt(w, r, sess, out)
	writeJSON(w, http.StatusOK, out)
	return nil
}

func respond(w http.ResponseWriter, status int, v any) error {
	body, err := marshal(v)
	if err != nil {
		return err
	}
	writeJSON(w, status, body)
	return nil
}

// Request checks shared by the handlers.

func noQuery(r *http.Request) error {
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		return newError(api.CodeUnexpectedQuery, "this operation takes no query string")
	}
	return nil
}

// noBody refuses a body, reading at most one byte of it.
func noBody(r *http.Request) error {
	if r.ContentLength == 0 {
		return nil
	}
	n, _ := io.ReadFull(r.Body, make([]byte, 1))
	if r.ContentLength > 0 || n > 0 {
		return newError(api.CodeUnexpectedBody, "this operation takes no request body")
	}
	return nil
}

func noQueryNoBody(r *http.Request) error {
	if err := noQuery(r); err != nil {
		return err
	}
	return noBody(r)
}

// idempotencyKey returns the one Idempotency-Key of r, unquoting the
// RFC 8941 string form of the IETF draft.
func idempotencyKey(r *http.Request) (string, error) {
	values := r.Header.Values(api.HeaderIdempotencyKey)
	switch len(values) {
	case 0:
		return "", newError(api.CodeMissingIdempotencyKey,
			"the Idempotency-Key header is required: 16 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-', unique per operation")
	case 1:
	default:
		return "", newError(api.CodeInvalidIdempotencyKey, "send exactly one Idempotency-Key header")
	}
	key := values[0]
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	if !validIdempotencyKey(key) {
		return "", newError(api.CodeInvalidIdempotencyKey,
			"Idempotency-Key must be 16 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'")
	}
	return key, nil
}

func validIdempotencyKey(k string) bool {
	return len(k) >= 16 && len(k) <= 128 && plain(k)
}

// plain reports whether s holds only A-Z, a-z, 0-9, '.', '_', ':' and '-'.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// jsonContent requires application/json, with at most a UTF-8 charset.
func jsonContent(r *http.Request) error {
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	charset, hasCharset := params["charset"]
	if err != nil || mediaType != "application/json" || hasCharset && !strings.EqualFold(charset, "utf-8") {
		return newError(api.CodeUnsupportedMediaType,
			"send the request as Content-Type: application/json (UTF-8)")
	}
	return nil
}

// readBody reads the body, never more than the limit plus one byte.
// readBody reads the body into buf, which holds metrics.MaxBodyBytes+1
// bytes: one more than a body may have, to tell a body at the limit from one
// beyond it. The body is a slice of buf.
func readBody(w http.ResponseWriter, r *http.Request, buf []byte) ([]byte, error) {
	tooLarge := func() error {
		w.Header().Set("Connection", "close") // the rest of the body is not read
		return newError(api.CodePayloadTooLarge,
			fmt.Sprintf("the request body exceeds %d bytes; send at most %d cases per request", metrics.MaxBodyBytes, metrics.MaxCases))
	}
	if r.ContentLength > metrics.MaxBodyBytes {
		return nil, tooLarge()
	}
	buf = buf[:metrics.MaxBodyBytes+1]
	n := 0
	for n < len(buf) {
		m, err := r.Body.Read(buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			// Not err's text: a network error names both ends' addresses.
			return nil, newError(api.CodeMalformedJSON,
				"the request body ended before its Content-Length or could not be read in time; send the whole body again, at a steady pace")
		}
	}
	if n > metrics.MaxBodyBytes {
		return nil, tooLarge()
	}
	return buf[:n], nil
}
