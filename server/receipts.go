package server

import (
	"net/http"

	"github.com/evalmeter/evalmeter/api"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/receipt"
)

// signReceipt names the client and the session of a metrics response and,
// when the server has a receipt key, signs it (README "Receipts").
func (s *Server) signReceipt(w http.ResponseWriter, r *http.Request, sess ledger.Session, body []byte) {
	h := w.Header()
	h.Set(api.HeaderClient, sess.ClientID)
	h.Set(api.HeaderSession, sess.ID)
	if s.receipts == nil {
		return
	}
	h.Set("Content-Type", "application/json") // as writeJSON sets it: it is signed
	m := &receipt.Message{Status: http.StatusOK, Header: h, Method: r.Method, TargetURI: s.targetURI(r)}
	if err := s.receipts.Sign(m, body, s.now()); err != nil {
		// The metrics are recorded: answer them unsigned rather than not at all.
		for _, f := range []string{"Content-Digest", "Signature-Input", "Signature"} {
			h.Del(f)
		}
		s.log.Warn("metrics response not signed", "request_id", requestInfoFrom(r).id, "error", err)
	}
}

// targetURI is the URI the client asked for: under PublicURL when the
// server has one (behind an ingress that ends TLS or rewrites the path),
// else the request's own scheme and Host.
func (s *Server) targetURI(r *http.Request) string {
	if s.publicURL != "" {
		return s.publicURL + r.URL.EscapedPath()
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.EscapedPath()
}

func (s *Server) getReceiptKeys(w http.ResponseWriter, r *http.Request) error {
	if err := noQueryNoBody(r); err != nil {
		return err
	}
	if s.receiptKeys == nil {
		return newError(api.CodeNotFound, "this service signs no receipts: it has no receipt key")
	}
	writeJSON(w, http.StatusOK, s.receiptKeys)
	return nil
}
