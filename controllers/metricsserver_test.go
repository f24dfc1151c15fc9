package controllers_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/evalmeter/evalmeter/controllers"
	"github.com/evalmeter/evalmeter/internal/charttest"
	"github.com/evalmeter/evalmeter/internal/polltest"
	"github.com/evalmeter/evalmeter/internal/proctest"
)

// TestMetricsServing serves the controller's metrics as the binary does,
// with the manager running as the chart's ServiceAccount: its TokenReviews
// and SubjectAccessReviews need the chart's metrics-auth ClusterRole, and a
// scraper needs the chart's metrics-reader ClusterRole.
func TestMetricsServing(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	clientset := kubernetes.NewForConfigOrDie(restConfig)
	reader := serviceAccountToken(t, clientset, ns, "reader")
	stranger := serviceAccountToken(t, clientset, ns, "stranger")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-reader-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: charttest.Release + "-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "reader"}},
	}
	if err := k8sClient.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k8sClient.Delete(context.Background(), binding) })

	certDir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("evalmeter-controller-metrics", []net.IP{{127, 0, 0, 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(certDir, "tls.crt"), certPEM, 0o600)
	os.WriteFile(filepath.Join(certDir, "tls.key"), keyPEM, 0o600)
	// The given certificate's chain: a client that trusts only it.
	trusted := x509.NewCertPool()
	if !trusted.AppendCertsFromPEM(certPEM) {
		t.Fatal("no certificate in the generated PEM")
	}

	// The certificate from the Secret is reloaded when the kubelet updates
	// the files: the endpoint serves the renewed one without a restart.
	t.Run("certificate renewed", func(t *testing.T) {
		serving := controllers.MetricsServing{BindAddress: proctest.FreeAddr(t), Secure: true, CertDir: certDir}
		startMetricsManager(t, serving)
		served := func() ([]byte, error) {
			conn, err := tls.Dial("tcp", serving.BindAddress, &tls.Config{InsecureSkipVerify: true})
			if err != nil {
				return nil, err
			}
			defer conn.Close()
			return conn.ConnectionState().PeerCertificates[0].Raw, nil
		}
		renewedPEM, renewedKey, err := certutil.GenerateSelfSignedCertKey("evalmeter-controller-metrics-renewed", []net.IP{{127, 0, 0, 1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		renewed, _ := pem.Decode(renewedPEM)
		polltest.Until(t, wait, "the first certificate served", func() error { _, err := served(); return err })
		os.WriteFile(filepath.Join(certDir, "tls.key"), renewedKey, 0o600)
		os.WriteFile(filepath.Join(certDir, "tls.crt"), renewedPEM, 0o600)
		polltest.Until(t, wait, "the renewed certificate served", func() error {
			raw, err := served()
			if err == nil && !bytes.Equal(raw, renewed.Bytes) {
				err = errors.New("still the first certificate")
			}
			return err
		})
		os.WriteFile(filepath.Join(certDir, "tls.crt"), certPEM, 0o600) // for the cases below
		os.WriteFile(filepath.Join(certDir, "tls.key"), keyPEM, 0o600)
	})

	for _, tc := range []struct {
		name    string
		serving controllers.MetricsServing
		scheme  string
		roots   *x509.CertPool // nil: skip verification (self-signed at start)
		tokens  map[string]int // bearer token -> status
	}{
		{
			name:    "secure, self-signed",
			serving: controllers.MetricsServing{Secure: true},
			scheme:  "https",
			// controller-runtime's filter answers 500 for a token the
			// TokenReview rejects: refused all the same.
			tokens: map[string]int{"": http.StatusUnauthorized, "not-a-token": http.StatusInternalServerError, stranger: http.StatusForbidden, reader: http.StatusOK},
		},
		{
			name:    "secure, certificate from a Secret",
			serving: controllers.MetricsServing{Secure: true, CertDir: certDir},
			scheme:  "https",
			roots:   trusted,
			tokens:  map[string]int{"": http.StatusUnauthorized, reader: http.StatusOK},
		},
		{
			name:    "plain HTTP for development",
			serving: controllers.MetricsServing{Secure: false},
			scheme:  "http",
			tokens:  map[string]int{"": http.StatusOK},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.serving.BindAddress = proctest.FreeAddr(t)
			startMetricsManager(t, tc.serving)
			tlsConfig := &tls.Config{RootCAs: tc.roots, InsecureSkipVerify: tc.roots == nil}
			scraper := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true}}
			url := tc.scheme + "://" + tc.serving.BindAddress + "/metrics"
			polltest.Until(t, wait, "the metrics endpoint", func() error {
				resp, err := scraper.Get(url)
				if err == nil {
					resp.Body.Close()
				}
				return err
			})
			for token, want := range tc.tokens {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := scraper.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				who := map[string]string{"": "no token", reader: "metrics-reader", stranger: "unbound ServiceAccount"}[token]
				if who == "" {
					who = "token " + token
				}
				if resp.StatusCode != want {
					t.Errorf("%s: status %d, want %d: %.200s", who, resp.StatusCode, want, body)
				}
				if want == http.StatusOK && !strings.Contains(string(body), "evalmeter_reconcile_errors_total") {
					t.Errorf("%s: the scrape lacks the controller's metrics: %.300s", who, body)
				}
				if tc.scheme == "https" && resp.Proto != "HTTP/1.1" {
					t.Errorf("%s: served over %s; HTTP/2 must be off", who, resp.Proto)
				}
			}
		})
	}
}

// startMetricsManager runs a manager that serves only metrics, as the
// chart's controller ServiceAccount, until the test ends.
func startMetricsManager(t *testing.T, serving controllers.MetricsServing) {
	t.Helper()
	opts, certs, err := serving.Options()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(controllerIdentity, ctrl.Options{Metrics: opts, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if certs != nil {
		if err := mgr.Add(certs); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// serviceAccountToken creates the ServiceAccount ns/name and returns a token
// of it from the TokenRequest API.
func serviceAccountToken(t *testing.T, clientset kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8sClient.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}
