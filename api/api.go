// Package api holds evalmeter's published contracts: the JSON Schema of the
// metrics request, served by GET /api/svc/v1/schema and tested against the
// engine's own validator, and the OpenAPI document of the HTTP API.
package api

import _ "embed"

// MetricsRequestSchema is the JSON Schema (draft 2020-12) of the body of
// POST /api/svc/v1/metrics.
//
//go:embed metrics-request.schema.json
var MetricsRequestSchema []byte

// OpenAPI is the OpenAPI 3.1.0 description of evalmeter's HTTP API (spec §4,
// DESIGN.md §4): its four operations, the two bearer security schemes, the
// shared responses and headers, and the schemas of every body. Its
// MetricsRequest component is MetricsRequestSchema with the $defs moved to
// sibling components; internal/contract checks requests and responses
// against it.
//
//go:embed openapi.yaml
var OpenAPI []byte

// LowCreditHeader is set on a usage answer when the client's remaining hours
// are at or below the low-credit threshold its operator set, as an RFC 8941
// dictionary: "remaining=1, threshold=2". The usage body is closed (spec
// §2.4), so the warning travels in a header.
const LowCreditHeader = "Evalmeter-Low-Credit"
