package tracing

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestConfigured(t *testing.T) {
	const endpoint = "http://collector:4318"
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{name: "no OTEL variables", env: nil, want: false},
		{name: "unrelated OTEL variables", env: map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, want: false},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, want: true},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint + "/v1/traces"}, want: true},
		{name: "empty endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, want: false},
		{name: "exporter otlp, default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{name: "exporter console", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, want: true},
		{name: "exporter unknown: on, so that Setup says what is wrong", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, want: true},
		{name: "exporter none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}, want: false},
		{name: "exporter none wins over an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, want: false},
		{name: "empty exporter, endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, want: true},
		{name: "SDK disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, want: false},
		{name: "SDK disabled, any case", env: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, want: false},
		{name: "SDK not disabled", env: map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, want: true},
		{name: "SDK disabled by anything but true: not", env: map[string]string{"OTEL_SDK_DISABLED": "1", "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(name string) (string, bool) {
				v, ok := tt.env[name]
				return v, ok
			}
			if got := Configured(lookup); got != tt.want {
				t.Errorf("Configured(%v) = %t, want %t", tt.env, got, tt.want)
			}
		})
	}
}

// TestEndpoint: the log line's endpoint never shows what could be a
// credential.
func TestEndpoint(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{nil, "(the exporter's default, on localhost)"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:pass@collector:4318/base?token=t"}, "https://collector:4318/base"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, "//collector:4317"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/v1/traces"}, "http://b:4318/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://[::1"}, "(unparsed OTEL_EXPORTER_OTLP_ENDPOINT)"},
	}
	for _, tt := range tests {
		get := getter(func(name string) (string, bool) { v, ok := tt.env[name]; return v, ok })
		if got := endpoint(get); got != tt.want {
			t.Errorf("endpoint(%v) = %q, want %q", tt.env, got, tt.want)
		}
	}
}

// TestSetup goes through the process environment, as evalmeter api does.
func TestSetup(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantOn  bool
		wantErr string // in the error; "" for none
	}{
		{name: "off", env: nil},
		{name: "disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
		{name: "OTLP over HTTP", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, wantOn: true},
		{name: "OTLP over gRPC", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantOn: true},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER "zipkin" is not supported`},
		{name: "unknown protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL "http/json" is not supported`},
		{name: "bad resource attributes", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_RESOURCE_ATTRIBUTES": "no-equals-sign"}, wantErr: "OTEL_RESOURCE_ATTRIBUTES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setenv(t, tt.env)
			tr, err := Setup(context.Background(), "v1.2.3")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Setup: %v, want an error mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tr != nil) != tt.wantOn {
				t.Fatalf("Setup: %+v, want tracing on: %t", tr, tt.wantOn)
			}
			if tr == nil {
				return
			}
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown with no span to flush: %v", err)
			}
		})
	}
}

func TestResource(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		wantService string
	}{
		{name: "default", wantService: ServiceName},
		{name: "OTEL_SERVICE_NAME", env: map[string]string{"OTEL_SERVICE_NAME": "evalmeter-api-eu"}, wantService: "evalmeter-api-eu"},
		{name: "OTEL_RESOURCE_ATTRIBUTES", env: map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes,deployment.environment.name=prod"}, wantService: "from-attributes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setenv(t, tt.env)
			res, err := newResource(context.Background(), "v1.2.3")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, kv := range res.Attributes() {
				got[string(kv.Key)] = kv.Value.Emit()
			}
			if got["service.name"] != tt.wantService || got["service.version"] != "v1.2.3" || got["telemetry.sdk.language"] != "go" {
				t.Errorf("resource %v, want service.name %q, service.version v1.2.3", got, tt.wantService)
			}
		})
	}
}

// otelVariables are the variables Setup reads; setenv clears the others.
var otelVariables = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SERVICE_NAME",
}

// setenv sets exactly env's OTEL_* variables for the test.
func setenv(t *testing.T, env map[string]string) {
	for _, k := range otelVariables {
		t.Setenv(k, env[k]) // restored when the test ends
		if _, set := env[k]; !set {
			os.Unsetenv(k)
		}
	}
}
