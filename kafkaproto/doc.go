// Package kafkaproto is runnel's Kafka wire-protocol listener: framing,
// connection handling and one file per API key, each a function from a kmsg
// request to a kmsg response. It talks to the rest of runnel only through the
// Broker interface, which the server package implements; errors cross that
// boundary as sentinels, mapped to Kafka error codes by one table. Both live
// in kafkaproto/kapi, the contract this package shares with its API
// families; contract.go gives them their kafkaproto names for everyone else.
//
// # Files
//
//	kapi/         the contract: Broker and its optional parts, their types, the
//	              sentinel errors and their Kafka codes, the handler entry (kapi.Handler)
//	              and what a handler reaches (kapi.Env)
//	admin/        the admin APIs: topics, configs, records, ACLs, client quotas,
//	              cluster admin (elections, reassignments, log dirs, quorum, features)
//	groups/       the consumer group APIs: FindCoordinator, membership, offsets, listings
//	txn/          the transaction coordinator's APIs (AddPartitionsToTxn, EndTxn, ...)
//	contract.go   aliases of kapi's names (kafkaproto.Broker is kapi.Broker)
//	env.go        the Server as every handler's kapi.Env; endpoints by listener
//	server.go     Options, Server: accept loop, the two doors (Serve for
//	              clients, ServePeers for brokers) and their connection caps, Close
//	conn.go       one connection: framing, request header, dispatch, response header
//	handlers.go   the handler table (API key -> versions, handler): this package's
//	              entries and the families'; SupportedVersions
//	fetchwrite.go Fetch response encoder that splices record chunks in (sendfile)
//	fetchsession.go fetch sessions (KIP-227), kept per connection; a fetch
//	              reads the partitions whose watch (kapi/watch.go) saw news
//	fetchids.go   Fetch v13+ topic ids resolved to names (UNKNOWN_TOPIC_ID)
//	pipeline.go   the connection's writer; acks=all produce waits moved off the reader
//	authz.go      authorization of each request (Options.RequireAuth, kapi.KafkaAuthorizer)
//	sasl.go       connection principals, RequireAuth's gate (SaslHandshake and
//	              SaslAuthenticate files below)
//	quotas.go     client quota enforcement (kapi.QuotaEnforcer): throttle_time_ms
//	              and the muted connection (KIP-219)
//	audit.go      the audit log lines of requests that change the cluster
//	<api>.go      one per API key: apiversions (and the feature levels of v3+),
//	              metadata, describetopicpartitions, produce, fetch, listoffsets,
//	              offsetforleaderepoch, initproducerid, writetxnmarkers (inter-broker
//	              only), saslhandshake, saslauthenticate
//
// # Goroutines and locks
//
// Serve runs the accept loop in the caller's goroutine. Each accepted
// connection gets a reader goroutine that reads and handles requests one at
// a time, so a client's produce requests append in the order sent (as in
// Kafka), and a writer goroutine (pipeline.go) that writes the responses in
// the same order; an acks=all produce waits for its replicas on the writer,
// so the reader goes on with the next request meanwhile. A Produce request
// touching several partitions appends them from produceParallelism
// short-lived goroutines that it waits for, each taking the next
// partition. A produce request with a timeout T is answered about T after
// it arrived, as clients expect: its appends begin until T less a grace G
// (min(T/2, 5 s)); partitions not reached by then are answered
// REQUEST_TIMED_OUT unwritten; its acks=all waits end at the later of
// arrival + T and the appends' end + G (pipeline.go: the time rule).
// Close closes listeners and connections and waits for every goroutine;
// handlers see the server's context cancelled. Server.mu guards only the
// listener and connection sets and is never held while calling the Broker.
// Per-connection state (fetch sessions) is reached through the request
// context and touched only by the connection's goroutine, but for a
// session's queue of partitions with news, which the broker's partitions
// fill through their watches under the session's own lock. The API families
// (admin, groups, txn) hold no lock and start no goroutine that outlives a
// request (admin's CreateTopics creates the topics of a request from
// short-lived ones it waits for): their handlers
// run on the connection's reader like this package's, and reach the Broker
// and the connection only through kapi.Env (env.go).
//
// # Doors
//
// A connection comes through the client door (Serve: the public Kafka port)
// or the peer door (ServePeers: inter-broker connections the server has
// authenticated on its raft port). Each door has its own connection budget,
// so clients cannot starve replication; the client door also caps the
// connections of one IP address. WriteTxnMarkers is refused (CLUSTER_AUTHORIZATION_FAILED) on the client
// door. Requests acting as a follower replica
// (Fetch and OffsetForLeaderEpoch with ReplicaID >= 0) are refused with
// TOPIC_AUTHORIZATION_FAILED on the client door, and on the peer door when
// the connection (a PeerConn) claimed another node id. Refusals are logged
// at most once per 10 s. A follower's fetch session may hold up to
// Options.MaxReplicaSessionPartitions partitions, a client's 10,000.
//
// # Limits
//
// A frame larger than Options.MaxRequestSize (Produce) or 1 MiB (any other
// API) closes the connection before its body is read; the frame buffer
// grows only as bytes arrive (a frame over 1 MiB gets an array of its own
// once half of it has). kmsg refuses an array count larger than the
// bytes left divided by the smallest element size before allocating, so a
// decoded request costs at most a small multiple (measured: 16x) of its
// frame. Unknown API keys, undecodable versions and malformed bodies close
// that connection only.
package kafkaproto
