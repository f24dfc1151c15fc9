// Package e2e runs evalmeter as its users do: processes, kubectl, HTTP.
//
// TestOperatorFlow runs in make test; the kind suites (build tag e2e) in
// make test-e2e and make test-e2e-ha.
package e2e
