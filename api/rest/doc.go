// Package rest is runnel's HTTP front door: it serves openapi.yaml over
// package api's contract. NewHandler builds the chi router (one handler
// group per resource, Routes() chi.Router each), the middleware chain
// (request id, access log, recoverer, body read within the node's memory
// budget, kin-openapi request validation), the SSE live tail, /docs,
// /livez, /readyz and /openapi.yaml; Limits and ConnLimiter are the node's
// HTTP memory, concurrency and connection limits. The Backend it calls, the
// wire types, the error table and the record codecs are package api's
// (api/DESIGN.md maps both packages' files).
//
// # Goroutines
//
// None of its own except per SSE request: one reader per streamed
// partition, started by the request goroutine, stopped by cancelling the
// request's derived context and waited for before the handler returns.
// Only the request goroutine writes.
//
// # Locks
//
// byteBudget.mu, slots.mu and ConnLimiter.mu guard their counters (leaf
// locks, never held across I/O); nothing else holds a lock. The handler is
// immutable after NewHandler.
package rest
