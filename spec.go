// Package runnel holds what must sit at the module root: the embedded OpenAPI
// spec (go:embed cannot reach a parent directory from api/ or server/).
package runnel

import _ "embed"

// OpenAPISpec is openapi.yaml, the source of truth for the HTTP contract.
//
//go:embed openapi.yaml
var OpenAPISpec []byte
