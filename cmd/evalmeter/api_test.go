//go:build !customer

package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmeter/evalmeter/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestAPIConfig(t *testing.T) {
	secret := strings.Repeat("s", 32)
	previous := strings.Repeat("p", 32)
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// As Kubernetes mounts a Secret written with `echo`: a trailing newline.
	secretFile := file("secret", secret+"\n")
	previousFile := file("previous", "  "+previous+"\n")
	emptyFile := file("empty", "\n")
	shortFile := file("short", "short\n")
	db := map[string]string{"DATABASE_URL": "postgres://x", "EVALMETER_TOKEN_SECRET": secret}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{"DATABASE_URL": "postgres://x", "EVALMETER_TOKEN_SECRET": secret}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}

	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string // in the error; "" for a valid configuration
		// For a valid configuration: the previous secret ("" for none) and
		// the pool bound.
		wantPrevious string
		wantMaxConns int32
		wantTrust    bool // a caller's traceparent is trusted
	}{
		{name: "valid", env: db, wantMaxConns: 10},
		{name: "flags over environment", env: map[string]string{"EVALMETER_TOKEN_SECRET": secret}, args: []string{"--database-url", "postgres://x", "--addr", "127.0.0.1:0"}, wantMaxConns: 10},
		{name: "no database", env: map[string]string{"EVALMETER_TOKEN_SECRET": secret}, want: "DATABASE_URL"},
		{name: "no secret", env: map[string]string{"DATABASE_URL": "postgres://x"}, want: "EVALMETER_TOKEN_SECRET"},
		{name: "short secret", env: with(map[string]string{"EVALMETER_TOKEN_SECRET": "short"}), want: "at least 32"},
		{name: "half TLS", env: db, args: []string{"--tls-cert", "c.pem"}, want: "--tls-key"},
		{name: "bad log level", env: db, args: []string{"--log-level", "loud"}, want: "--log-level"},
		{name: "missing secret file", env: map[string]string{"DATABASE_URL": "postgres://x"}, args: []string{"--token-secret-file", "/no/such/file"}, want: "--token-secret-file"},
		{name: "secret file, trimmed", env: map[string]string{"DATABASE_URL": "postgres://x"}, args: []string{"--token-secret-file", secretFile}, wantMaxConns: 10},
		{name: "short secret file", env: map[string]string{"DATABASE_URL": "postgres://x"}, args: []string{"--token-secret-file", shortFile}, want: "at least 32"},
		{name: "stray argument", env: db, args: []string{"serve"}, want: "unexpected argument"},

		// The previous secret: a file like the current one, or the environment.
		{name: "previous secret file, trimmed", env: db, args: []string{"--token-secret-previous-file", previousFile}, wantPrevious: previous, wantMaxConns: 10},
		{name: "previous secret file from the environment", env: with(map[string]string{"EVALMETER_TOKEN_SECRET_PREVIOUS_FILE": previousFile}), wantPrevious: previous, wantMaxConns: 10},
		{name: "previous secret in the environment", env: with(map[string]string{"EVALMETER_TOKEN_SECRET_PREVIOUS": previous}), wantPrevious: previous, wantMaxConns: 10},
		{name: "previous secret file over the environment", env: with(map[string]string{"EVALMETER_TOKEN_SECRET_PREVIOUS": strings.Repeat("e", 32)}), args: []string{"--token-secret-previous-file", previousFile}, wantPrevious: previous, wantMaxConns: 10},
		{name: "empty previous secret file: no rotation", env: db, args: []string{"--token-secret-previous-file", emptyFile}, wantMaxConns: 10},
		{name: "missing previous secret file", env: db, args: []string{"--token-secret-previous-file", "/no/such/file"}, want: "--token-secret-previous-file"},
		{name: "short previous secret", env: db, args: []string{"--token-secret-previous-file", shortFile}, want: "previous token secret"},
		{name: "both secrets in files", env: map[string]string{"DATABASE_URL": "postgres://x"}, args: []string{"--token-secret-file", secretFile, "--token-secret-previous-file", previousFile}, wantPrevious: previous, wantMaxConns: 10},

		// The pool bound.
		{name: "max conns from the environment", env: with(map[string]string{"EVALMETER_DB_MAX_CONNS": "25"}), wantMaxConns: 25},
		{name: "max conns flag over the environment", env: with(map[string]string{"EVALMETER_DB_MAX_CONNS": "25"}), args: []string{"--db-max-conns", "4"}, wantMaxConns: 4},
		{name: "max conns 0: pgx's default", env: db, args: []string{"--db-max-conns", "0"}, wantMaxConns: 0},
		{name: "negative max conns", env: db, args: []string{"--db-max-conns", "-1"}, want: "--db-max-conns"},
		{name: "max conns not a number", env: with(map[string]string{"EVALMETER_DB_MAX_CONNS": "ten"}), want: "--db-max-conns"},
		{name: "max conns beyond int32", env: db, args: []string{"--db-max-conns", "4294967296"}, want: "--db-max-conns"},

		// Callers' trace context: linked to by default, the parent when trusted.
		{name: "trust trace context from the environment", env: with(map[string]string{"EVALMETER_TRUST_TRACE_CONTEXT": "true"}), wantMaxConns: 10, wantTrust: true},
		{name: "trust trace context flag", env: db, args: []string{"--trust-trace-context"}, wantMaxConns: 10, wantTrust: true},
		{name: "trust trace context flag over the environment", env: with(map[string]string{"EVALMETER_TRUST_TRACE_CONTEXT": "true"}), args: []string{"--trust-trace-context=false"}, wantMaxConns: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.env, "DATABASE_URL", "EVALMETER_TOKEN_SECRET", "EVALMETER_TOKEN_SECRET_PREVIOUS", "EVALMETER_TOKEN_SECRET_FILE",
				"EVALMETER_TOKEN_SECRET_PREVIOUS_FILE", "EVALMETER_ADDR", "EVALMETER_DB_MAX_CONNS", "EVALMETER_TRUST_TRACE_CONTEXT")
			cfg, err := parseAPIConfig(tt.args, io.Discard)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %v, want one mentioning %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("valid configuration refused: %v", err)
			}
			if cfg.databaseURL != "postgres://x" || string(cfg.tokenSecrets[0]) != secret {
				t.Errorf("database %q, secret %q", cfg.databaseURL, cfg.tokenSecrets[0])
			}
			var gotPrevious string
			if len(cfg.tokenSecrets) > 1 {
				gotPrevious = string(cfg.tokenSecrets[1])
			}
			if gotPrevious != tt.wantPrevious || len(cfg.tokenSecrets) > 2 {
				t.Errorf("secrets %q, want the previous one %q", cfg.tokenSecrets, tt.wantPrevious)
			}
			if cfg.dbMaxConns != tt.wantMaxConns {
				t.Errorf("dbMaxConns %d, want %d", cfg.dbMaxConns, tt.wantMaxConns)
			}
			if cfg.trustTraceContext != tt.wantTrust {
				t.Errorf("trustTraceContext %t, want %t", cfg.trustTraceContext, tt.wantTrust)
			}
		})
	}
}

// setEnv gives each of keys its value in env, and unsets those env does not
// hold, until the test ends.
func setEnv(t *testing.T, env map[string]string, keys ...string) {
	t.Helper()
	for _, k := range keys {
		t.Setenv(k, env[k]) // restored when the test ends
		if _, set := env[k]; !set {
			os.Unsetenv(k)
		}
	}
}
