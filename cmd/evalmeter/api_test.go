package main

import (
	"io"
	"strings"
	"testing"
)

func TestAPIConfig(t *testing.T) {
	secret := strings.Repeat("s", 32)
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string // in the error; "" for a valid configuration
	}{
		{"valid", map[string]string{"DATABASE_URL": "postgres://x", "EVALMETER_TOKEN_SECRET": secret}, nil, ""},
		{"flags over environment", map[string]string{"EVALMETER_TOKEN_SECRET": secret}, []string{"--database-url", "postgres://x", "--addr", "127.0.0.1:0"}, ""},
		{"no database", map[string]string{"EVALMETER_TOKEN_SECRET": secret}, nil, "DATABASE_URL"},
		{"no secret", map[string]string{"DATABASE_URL": "postgres://x"}, nil, "EVALMETER_TOKEN_SECRET"},
		{"short secret", map[string]string{"DATABASE_URL": "postgres://x", "EVALMETER_TOKEN_SECRET": "short"}, nil, "at least 32"},
		{"half TLS", map[string]string{"DATABASE_URL": "postgres://x", "EVALMETER_TOKEN_SECRET": secret}, []string{"--tls-cert", "c.pem"}, "--tls-key"},
		{"bad log level", map[string]string{"DATABASE_URL": "postgres://x", "EVALMETER_TOKEN_SECRET": secret}, []string{"--log-level", "loud"}, "--log-level"},
		{"missing secret file", map[string]string{"DATABASE_URL": "postgres://x"}, []string{"--token-secret-file", "/no/such/file"}, "--token-secret-file"},
		{"stray argument", map[string]string{"DATABASE_URL": "postgres://x", "EVALMETER_TOKEN_SECRET": secret}, []string{"serve"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"DATABASE_URL", "EVALMETER_TOKEN_SECRET", "EVALMETER_TOKEN_SECRET_PREVIOUS", "EVALMETER_TOKEN_SECRET_FILE", "EVALMETER_ADDR"} {
				t.Setenv(k, tt.env[k])
			}
			cfg, err := parseAPIConfig(tt.args, io.Discard)
			if tt.want == "" {
				if err != nil || cfg.databaseURL != "postgres://x" || len(cfg.tokenSecrets[0]) != 32 {
					t.Errorf("valid configuration refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}
