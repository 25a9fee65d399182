// Package kapi is the contract of runnel's Kafka listener, shared by the
// listener (package kafkaproto), its API families (kafkaproto/admin,
// kafkaproto/groups, kafkaproto/txn) and the server that implements it:
//
//	broker.go   the Broker interface (MetadataSource, Partitions, Admin) and its types;
//	            the optional MetadataCatchUp and TopicLookup (one topic, no Cluster)
//	optional.go optional data-path parts: ReplicatedProducer, TxnMarkerWriter, QuotaEnforcer
//	admin.go    optional admin parts: ClusterAdmin, ACLAdmin, QuotaAdmin,
//	            ProducerStates, PartitionAssigner
//	groups.go   the optional GroupCoordinator and its types; the client in ctx
//	txn.go      the optional TxnCoordinator and its types
//	auth.go     the optional Authenticator and KafkaAuthorizer
//	errors.go   sentinel errors and THE table mapping them to Kafka codes
//	            (KafkaErr; GroupErr and TxnErr for the group and transaction APIs)
//	handler.go  Handler, one entry of the handler table, and Env, what a
//	            handler reaches besides its request; helpers handlers of
//	            several packages share (AdminContext, CheckAdminTopics,
//	            ValidTopicName)
//	features.go the feature levels (KIP-584) ApiVersions advertises and
//	            UpdateFeatures checks
//	kapitest/   an Env without a listener, to test the families' handlers
//	            in-process
//
// Outside kafkaproto these names are used through kafkaproto's aliases
// (kafkaproto.Broker, kafkaproto.ErrNotLeader, ...), so callers keep one
// import. kapi imports no project package; it starts no goroutine and holds
// no lock (Cluster snapshots are immutable once shared).
package kapi
