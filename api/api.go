// Package api holds evalmeter's published contracts: the JSON Schema of the
// metrics request, served by GET /api/svc/v1/schema and tested against the
// engine's own validator.
package api

import _ "embed"

// MetricsRequestSchema is the JSON Schema (draft 2020-12) of the body of
// POST /api/svc/v1/metrics.
//
//go:embed metrics-request.schema.json
var MetricsRequestSchema []byte
