// Package kafkaconn is the broker's Kafka client to another broker's
// inter-broker port (internode's K protocol): a follower fetches from its
// leader with it, and the transaction coordinator and the HTTP door write
// transaction markers (WriteTxnMarkers) through it. Requests and responses
// are kmsg's types; a response frame is bounded before it is allocated.
//
// Goroutines: none. A Conn carries one request at a time and is not safe
// for concurrent use; its owner closes it.
package kafkaconn
