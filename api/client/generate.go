// Package client is a Go client for runnel's HTTP API, generated from
// openapi.yaml by oapi-codegen. Do not edit client.gen.go: run `go generate
// ./api/client` (TestClientUpToDate fails when it is stale).
//
// Use NewClientWithResponses(baseURL) for typed responses:
//
//	c, _ := client.NewClientWithResponses("http://localhost:8080")
//	res, _ := c.ListTopicsWithResponse(ctx)
//	for _, t := range res.JSON200.Topics { ... }
package client

//go:generate go tool oapi-codegen -config config.yaml ../../openapi.yaml
