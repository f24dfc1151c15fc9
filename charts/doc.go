// Package charts tests the Helm chart: lint, its values schema, and every
// object it renders, checked by a real kube-apiserver (server-side dry run).
package charts
