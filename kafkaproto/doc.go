// Package kafkaproto is runnel's Kafka wire-protocol listener: framing,
// connection handling and one file per API key, each a function from a kmsg
// request to a kmsg response. It talks to the rest of runnel only through the
// Broker interface (broker.go), which the server package implements; errors
// cross that boundary as the sentinels in errors.go.
package kafkaproto
