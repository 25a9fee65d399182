// Package admin serves the Kafka admin APIs of runnel's listener: topics,
// configs, records, ACLs, client quotas and cluster admin (elections,
// reassignments, log dirs, the quorum, features, producers). Each file is
// one API key, opening with the versions it serves; handlers.go lists them
// (Handlers), and the listener's table (kafkaproto/handlers.go) takes them
// in. A handler is a function of a kapi.Env (the listener: the Broker, the
// request's connection) and a decoded kmsg request, answering a kmsg
// response; errors become Kafka codes through kapi's one table.
//
// # Files
//
//	handlers.go   Handlers: the admin API keys and versions; helpers they share
//	clusteradmin.go the optional kapi.ClusterAdmin, found on the Broker
//	acls.go       ACLs between the wire's enums and the broker's names
//	assignments.go explicit replica assignments (CreateTopics, CreatePartitions)
//	<api>.go      one per API key: createtopics, deletetopics, createpartitions,
//	              deleterecords, describeconfigs, alterconfigs,
//	              incrementalalterconfigs, listconfigresources, describecluster,
//	              describeacls, createacls, deleteacls, describeclientquotas,
//	              alterclientquotas, electleaders, alterpartitionreassignments,
//	              listpartitionreassignments, describelogdirs, alterreplicalogdirs,
//	              describequorum, updatefeatures, describeproducers
//
// # Goroutines and locks
//
// Handlers run on the connection's goroutine that calls them, hold no
// lock and keep no state between requests. CreateTopics creates a
// request's topics from at most createParallel short-lived goroutines that
// it waits for (their proposals share the controller's log appends); no
// other handler starts one. What they wait
// for (the controller, through the Broker) is bounded by the request's
// timeout (kapi.AdminContext) or the listener's context. It imports only
// kafkaproto/kapi of the project.
package admin
