package server

import (
	"errors"
	"net/http"
	"strings"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
)

// maxCredentialBytes bounds the Authorization header's credential.
const maxCredentialBytes = 256

// bearer returns the credential of the one Authorization: Bearer header.
func bearer(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return "", unauthorized("send your credential as Authorization: Bearer <credential>", false)
	}
	scheme, cred, ok := strings.Cut(values[0], " ")
	if len(values) > 1 || !ok || !strings.EqualFold(scheme, "Bearer") || cred == "" ||
		len(cred) > maxCredentialBytes || strings.ContainsAny(cred, " \t") {
		return "", unauthorized("the Authorization header must be exactly: Bearer <credential>", true)
	}
	return cred, nil
}

// clientByKey authenticates r by API key and checks the agreement.
func (s *Server) clientByKey(r *http.Request) (ledger.Client, error) {
	key, err := bearer(r)
	if err != nil {
		return ledger.Client{}, err
	}
	hash, err := credential.HashAPIKey(key)
	if err != nil {
		return ledger.Client{}, unauthorized("the credential is not a valid API key", true)
	}
	// The hash is looked up, not compared: timing reveals nothing of the key.
	client, err := s.ledger.ClientByKey(r.Context(), hash, s.now())
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.Client{}, unauthorized("the API key is not valid or has been revoked", true)
	}
	if err != nil {
		return ledger.Client{}, err
	}
	requestInfoFrom(r).clientID = client.ID
	if client.Expired(s.now()) {
		return ledger.Client{}, newError(api.CodeAgreementExpired,
			"the access agreement of client "+client.ID+" ended at "+client.ValidUntil.UTC().Format("2006-01-02T15:04:05Z07:00")+"; contact your operator")
	}
	return client, nil
}

// session authenticates r by session token, valid for the session's window.
// cached reports that the session came from the cache, not the ledger: it
// may have ended since.
func (s *Server) session(r *http.Request) (sess ledger.Session, cached bool, err error) {
	token, err := bearer(r)
	if err != nil {
		return ledger.Session{}, false, err
	}
	invalid := unauthorized("the session token is not valid; open a session with your API key", true)
	// The HMAC first: a forged token costs no query.
	id, keyID, ok := s.tokens.Authenticate(token)
	if !ok {
		return ledger.Session{}, false, invalid
	}
	sess, cached = s.sessions.get(id, s.now())
	if !cached {
		if sess, err = s.liveSession(r, id); err != nil {
			return ledger.Session{}, false, err
		}
	}
	// Signed by a configured key, but not the session's: a retired key
	// that leaked must not forge tokens of sessions signed after it.
	if sess.TokenKeyID != keyID {
		return ledger.Session{}, false, invalid
	}
	info := requestInfoFrom(r)
	info.clientID, info.sessionID = sess.ClientID, sess.ID
	if !s.now().Before(sess.ExpiresAt) {
		return ledger.Session{}, false, unauthorized("the session's 60-minute window has ended; open a new session", true)
	}
	return sess, cached, nil
}

// liveSession reads the session from the ledger, caching it when it is
// live, and refuses one that has ended or does not exist.
func (s *Server) liveSession(r *http.Request, id string) (ledger.Session, error) {
	sess, err := s.ledger.Session(r.Context(), id, s.now())
	switch {
	case errors.Is(err, ledger.ErrSessionEnded):
		s.sessions.drop(id)
		return ledger.Session{}, sessionEnded()
	case errors.Is(err, ledger.ErrNotFound):
		return ledger.Session{}, unauthorized("the session token is not valid; open a session with your API key", true)
	case err != nil:
		return ledger.Session{}, err
	}
	s.sessions.put(sess, s.now())
	return sess, nil
}

func sessionEnded() *apiError {
	return unauthorized("the session was ended because the API key that opened it was revoked; open a new session with your current API key", true)
}
