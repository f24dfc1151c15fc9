package receipt

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// File is a receipt as a customer keeps it and hands it to a third party:
// the signed response whole, and the request it answers.
type File struct {
	// Status is the response's HTTP status.
	Status int `json:"status"`
	// Headers are the response's fields, names in lower case, repeated
	// lines joined with ", ": every signed field among them.
	Headers map[string]string `json:"headers"`
	// Body is the response body exactly as sent.
	Body    string      `json:"body"`
	Request FileRequest `json:"request"`
}

// FileRequest is the request a receipt answers.
type FileRequest struct {
	Method    string `json:"method"`
	TargetURI string `json:"target_uri"`
}

// leftOut are fields a receipt does not keep: those of one connection
// (hop-by-hop), and cookies a proxy may set, which are nobody else's.
var leftOut = map[string]bool{"connection": true, "keep-alive": true, "transfer-encoding": true, "te": true, "trailer": true, "upgrade": true, "proxy-connection": true, "set-cookie": true}

// NewFile is the receipt of a response.
func NewFile(status int, header http.Header, body []byte, method, targetURI string) *File {
	f := &File{Status: status, Headers: map[string]string{}, Body: string(body), Request: FileRequest{Method: method, TargetURI: targetURI}}
	for name, values := range header {
		n := strings.ToLower(name)
		if leftOut[n] {
			continue
		}
		f.Headers[n] = strings.Join(values, ", ")
	}
	return f
}

// Message is the receipt as a signed message, and its body.
func (f *File) Message() (*Message, []byte) {
	h := http.Header{}
	names := make([]string, 0, len(f.Headers))
	for n := range f.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h.Set(n, f.Headers[n])
	}
	return &Message{Status: f.Status, Header: h, Method: f.Request.Method, TargetURI: f.Request.TargetURI}, []byte(f.Body)
}

// maxFileBytes bounds a receipt file: a metrics response and its fields.
const maxFileBytes = 1 << 20

// ParseFile reads a receipt file.
func ParseFile(b []byte) (*File, error) {
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes: not a receipt", maxFileBytes)
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not a receipt file: %v", err)
	}
	if f.Status == 0 || f.Headers == nil || f.Request.Method == "" || f.Request.TargetURI == "" {
		return nil, fmt.Errorf("not a receipt file: it needs status, headers, body and request {method, target_uri}")
	}
	return &f, nil
}
