// Package kafkaconn is the broker's Kafka client to another broker's
// inter-broker port (internode's K protocol): a follower fetches from its
// leader with it, and the transaction coordinator and the HTTP door write
// transaction markers (WriteTxnMarkers) through it. Requests and responses
// are kmsg's types; a response frame is bounded before it is allocated. A
// follower's Fetch answers are decoded into memory kept from one answer to
// the next (FetchAnswer, fetch.go), their record batches slices of the
// frame read, and its fetch loop's context is watched once for the
// connection (Watch), not once a request.
//
// Goroutines: none of its own (the end of a watched context, or of Do's,
// sets the connection's deadline from the context package's). A Conn carries one request at a time and is not safe
// for concurrent use; its owner closes it.
package kafkaconn
