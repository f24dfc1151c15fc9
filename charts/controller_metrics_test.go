package charts

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestControllerMetrics: the controller's metrics are HTTPS with
// authentication unless turned off, with the certificate of a Secret when
// one is named, and the extra volumes still there.
func TestControllerMetrics(t *testing.T) {
	for _, tc := range []struct {
		name     string
		metrics  map[string]any
		wantArgs []string
		certs    bool // the certificate Secret mounted
		authRole bool // the ClusterRole for TokenReviews and SubjectAccessReviews
	}{
		{"default", nil, []string{"--metrics-bind-address=:8443", "--metrics-secure=true"}, false, true},
		{"cert-manager", map[string]any{"certSecret": "evalmeter-metrics-tls"},
			[]string{"--metrics-secure=true", "--metrics-cert-dir=/etc/evalmeter/metrics-certs"}, true, true},
		{"plain HTTP", map[string]any{"secure": false}, []string{"--metrics-secure=false"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			controller := withExtras(map[string]any{})
			if tc.metrics != nil {
				controller["metrics"] = tc.metrics
			}
			objs := mustRender(t, map[string]any{"controller": controller})
			c := container(t, objs, "evalmeter-controller", "controller")
			for _, arg := range tc.wantArgs {
				if !slices.Contains(c.Args, arg) {
					t.Errorf("args %v lack %s", c.Args, arg)
				}
			}
			if slices.Contains(c.Args, "--metrics-cert-dir=/etc/evalmeter/metrics-certs") != tc.certs {
				t.Errorf("args %v: --metrics-cert-dir, want it %v", c.Args, tc.certs)
			}
			var d appsv1.Deployment
			object(t, objs, "Deployment", "evalmeter-controller", &d)
			mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "metrics-certs" })
			volume := slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Name == "metrics-certs" && v.Secret != nil && v.Secret.SecretName == "evalmeter-metrics-tls"
			})
			if mounted != tc.certs || volume != tc.certs {
				t.Errorf("certificate mounted %v, volume %v; want %v", mounted, volume, tc.certs)
			}
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "db-ca" }) {
				t.Errorf("the extra mount is gone: %v", c.VolumeMounts)
			}
			var svc corev1.Service
			object(t, objs, "Service", "evalmeter-controller-metrics", &svc)
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.StrVal != "metrics" {
				t.Errorf("metrics Service ports %+v", svc.Spec.Ports)
			}
			auth := slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
				return o.GetKind() == "ClusterRole" && o.GetName() == "evalmeter-metrics-auth"
			})
			if auth != tc.authRole {
				t.Errorf("ClusterRole evalmeter-metrics-auth rendered %v, want %v", auth, tc.authRole)
			}
		})
	}
}
