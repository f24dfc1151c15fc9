// Package api is evalmeter's HTTP contract in one place: the wire types of
// every body (the session, usage, metrics and error envelopes, the schema
// document), every error code with its status, the paths and the headers,
// beside the OpenAPI document and the JSON Schema of the metrics request
// that they implement. The server, the Go client and the tests all use
// these types; none writes its own. The CRD types are in api/v1alpha1.
package api

import _ "embed"

// MetricsRequestSchema is the JSON Schema (draft 2020-12) of the body of
// POST /api/svc/v1/metrics.
//
//go:embed metrics-request.schema.json
var MetricsRequestSchema []byte

// OpenAPI is the OpenAPI 3.1.0 description of evalmeter's HTTP API: its four
// operations and the receipt keys' document, the two bearer security
// schemes, the shared responses and headers, and the schemas of every body.
// Its MetricsRequest component is MetricsRequestSchema with the $defs moved
// to sibling components; internal/openapitest checks requests and responses
// against it.
//
//go:embed openapi.yaml
var OpenAPI []byte
