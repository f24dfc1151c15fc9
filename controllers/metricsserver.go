package controllers

import (
	"crypto/tls"
	"fmt"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// MetricsServing says how the manager serves /metrics.
type MetricsServing struct {
	// BindAddress is the address to listen on; "0" disables the endpoint.
	BindAddress string
	// Secure serves HTTPS to callers that the API server authenticates
	// (TokenReview) and authorizes to get the /metrics URL
	// (SubjectAccessReview). Otherwise plain HTTP to anyone: development only.
	Secure bool
	// CertDir holds tls.crt and tls.key, reloaded when they change. Empty
	// makes a self-signed certificate at start.
	CertDir string
}

// Options are the manager's metrics server options for s, and the watcher of
// CertDir's certificate, to be added to the manager (nil without CertDir).
func (s MetricsServing) Options() (metricsserver.Options, *certwatcher.CertWatcher, error) {
	opts := metricsserver.Options{
		BindAddress:   s.BindAddress,
		SecureServing: s.Secure,
		// HTTP/1.1 only: HTTP/2 stream resets (CVE-2023-44487, CVE-2023-39325)
		// cost a scraper nothing, and Prometheus does not need HTTP/2.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
	if !s.Secure {
		return opts, nil, nil
	}
	opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	if s.CertDir == "" {
		return opts, nil, nil
	}
	certs, err := certwatcher.New(filepath.Join(s.CertDir, "tls.crt"), filepath.Join(s.CertDir, "tls.key"))
	if err != nil {
		return metricsserver.Options{}, nil, fmt.Errorf("metrics certificate in %s (tls.crt and tls.key): %w", s.CertDir, err)
	}
	opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.GetCertificate = certs.GetCertificate })
	return opts, certs, nil
}
