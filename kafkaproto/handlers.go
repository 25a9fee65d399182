package kafkaproto

import (
	"context"
	"slices"

	"github.com/runnel/runnel/kafkaproto/kapi"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handle adapts a typed handler of this package (a method on *Server) to a
// kapi.Handler. The Server is the kapi.Env its handlers are called with, so
// the adapter is one type assertion, not an allocation.
func handle[Req kmsg.Request, Resp kmsg.Response](key, minV, maxV int16,
	serve func(*Server, context.Context, Req) Resp, fail func(Req, int16) Resp,
) kapi.Handler {
	return kapi.Handler{
		Key: key, Min: minV, Max: maxV,
		Serve: func(env kapi.Env, ctx context.Context, req kmsg.Request) kmsg.Response {
			return serve(env.(*Server), ctx, req.(Req))
		},
		Fail: func(req kmsg.Request, code int16) kmsg.Response { return fail(req.(Req), code) },
	}
}

// handlerTable lists every API the listener implements, with the version
// range it advertises. Each entry's constants and functions live in the
// file named after the API.
func handlerTable() map[int16]kapi.Handler {
	t := make(map[int16]kapi.Handler)
	for _, h := range []kapi.Handler{
		handle(produceKey, produceMin, produceMax, (*Server).produce, produceError),
		handle(fetchKey, fetchMin, fetchMax, (*Server).fetch, fetchError),
		handle(listOffsetsKey, listOffsetsMin, listOffsetsMax, (*Server).listOffsets, listOffsetsError),
		handle(metadataKey, metadataMin, metadataMax, (*Server).metadata, metadataError),
		handle(apiVersionsKey, apiVersionsMin, apiVersionsMax, (*Server).apiVersions, apiVersionsFail),
		handle(createTopicsKey, createTopicsMin, createTopicsMax, (*Server).createTopics, createTopicsError),
		handle(deleteTopicsKey, deleteTopicsMin, deleteTopicsMax, (*Server).deleteTopics, deleteTopicsError),
		handle(deleteRecordsKey, deleteRecordsMin, deleteRecordsMax, (*Server).deleteRecords, deleteRecordsError),
		handle(initProducerIDKey, initProducerIDMin, initProducerIDMax, (*Server).initProducerID, initProducerIDError),
		handle(offsetForLeaderEpochKey, offsetForLeaderEpochMin, offsetForLeaderEpochMax, (*Server).offsetForLeaderEpoch, offsetForLeaderEpochError),
		handle(describeConfigsKey, describeConfigsMin, describeConfigsMax, (*Server).describeConfigs, describeConfigsError),
		handle(createPartitionsKey, createPartitionsMin, createPartitionsMax, (*Server).createPartitions, createPartitionsError),
		handle(incrementalAlterConfigsKey, incrementalAlterConfigsMin, incrementalAlterConfigsMax, (*Server).incrementalAlterConfigs, incrementalAlterConfigsError),
		handle(describeClusterKey, describeClusterMin, describeClusterMax, (*Server).describeCluster, describeClusterError),
		handle(offsetCommitKey, offsetCommitMin, offsetCommitMax, (*Server).offsetCommit, offsetCommitError),
		handle(offsetFetchKey, offsetFetchMin, offsetFetchMax, (*Server).offsetFetch, offsetFetchError),
		handle(findCoordinatorKey, findCoordinatorMin, findCoordinatorMax, (*Server).findCoordinator, findCoordinatorError),
		handle(joinGroupKey, joinGroupMin, joinGroupMax, (*Server).joinGroup, joinGroupError),
		handle(heartbeatKey, heartbeatMin, heartbeatMax, (*Server).heartbeat, heartbeatError),
		handle(leaveGroupKey, leaveGroupMin, leaveGroupMax, (*Server).leaveGroup, leaveGroupError),
		handle(syncGroupKey, syncGroupMin, syncGroupMax, (*Server).syncGroup, syncGroupError),
		handle(describeGroupsKey, describeGroupsMin, describeGroupsMax, (*Server).describeGroups, describeGroupsError),
		handle(listGroupsKey, listGroupsMin, listGroupsMax, (*Server).listGroups, listGroupsError),
		handle(deleteGroupsKey, deleteGroupsMin, deleteGroupsMax, (*Server).deleteGroups, deleteGroupsError),
		handle(offsetDeleteKey, offsetDeleteMin, offsetDeleteMax, (*Server).offsetDelete, offsetDeleteError),
		// Cluster admin (issue 18).
		handle(alterConfigsKey, alterConfigsMin, alterConfigsMax, (*Server).alterConfigs, alterConfigsError),
		handle(describeLogDirsKey, describeLogDirsMin, describeLogDirsMax, (*Server).describeLogDirs, describeLogDirsError),
		handle(electLeadersKey, electLeadersMin, electLeadersMax, (*Server).electLeaders, electLeadersError),
		handle(alterPartitionReassignmentsKey, alterPartitionReassignmentsMin, alterPartitionReassignmentsMax, (*Server).alterPartitionReassignments, alterPartitionReassignmentsError),
		handle(listPartitionReassignmentsKey, listPartitionReassignmentsMin, listPartitionReassignmentsMax, (*Server).listPartitionReassignments, listPartitionReassignmentsError),
		handle(describeQuorumKey, describeQuorumMin, describeQuorumMax, (*Server).describeQuorum, describeQuorumError),
		handle(updateFeaturesKey, updateFeaturesMin, updateFeaturesMax, (*Server).updateFeatures, updateFeaturesError),
		handle(describeTopicPartitionsKey, describeTopicPartitionsMin, describeTopicPartitionsMax, (*Server).describeTopicPartitions, describeTopicPartitionsError),
		handle(alterReplicaLogDirsKey, alterReplicaLogDirsMin, alterReplicaLogDirsMax, (*Server).alterReplicaLogDirs, alterReplicaLogDirsError),
		handle(listConfigResourcesKey, listConfigResourcesMin, listConfigResourcesMax, (*Server).listConfigResources, listConfigResourcesError),
		// Transactions (issue 16).
		handle(addPartitionsToTxnKey, addPartitionsToTxnMin, addPartitionsToTxnMax, (*Server).addPartitionsToTxn, addPartitionsToTxnError),
		handle(addOffsetsToTxnKey, addOffsetsToTxnMin, addOffsetsToTxnMax, (*Server).addOffsetsToTxn, addOffsetsToTxnError),
		handle(endTxnKey, endTxnMin, endTxnMax, (*Server).endTxn, endTxnError),
		handle(txnOffsetCommitKey, txnOffsetCommitMin, txnOffsetCommitMax, (*Server).txnOffsetCommit, txnOffsetCommitError),
		handle(describeTransactionsKey, describeTransactionsMin, describeTransactionsMax, (*Server).describeTransactions, describeTransactionsError),
		handle(listTransactionsKey, listTransactionsMin, listTransactionsMax, (*Server).listTransactions, listTransactionsError),
		handle(describeProducersKey, describeProducersMin, describeProducersMax, (*Server).describeProducers, describeProducersError),
		handle(saslHandshakeKey, saslHandshakeMin, saslHandshakeMax, (*Server).saslHandshake, saslHandshakeError),
		handle(saslAuthenticateKey, saslAuthenticateMin, saslAuthenticateMax, (*Server).saslAuthenticate, saslAuthenticateError),
		handle(describeACLsKey, describeACLsMin, describeACLsMax, (*Server).describeACLs, describeACLsError),
		handle(createACLsKey, createACLsMin, createACLsMax, (*Server).createACLs, createACLsError),
		handle(deleteACLsKey, deleteACLsMin, deleteACLsMax, (*Server).deleteACLs, deleteACLsError),
		// Transactions, log side.
		handle(writeTxnMarkersKey, writeTxnMarkersMin, writeTxnMarkersMax, (*Server).writeTxnMarkers, writeTxnMarkersError),
		// Client quotas (issue 15; quotas.go).
		handle(describeClientQuotasKey, describeClientQuotasMin, describeClientQuotasMax, (*Server).describeClientQuotas, describeClientQuotasError),
		handle(alterClientQuotasKey, alterClientQuotasMin, alterClientQuotasMax, (*Server).alterClientQuotas, alterClientQuotasError),
	} {
		t[h.Key] = h
	}
	return t
}

// APIVersion is one supported API key and its version range.
type APIVersion struct {
	Key        int16  `json:"api_key"`
	Name       string `json:"name"`
	MinVersion int16  `json:"min_version"`
	MaxVersion int16  `json:"max_version"`
}

// SupportedVersions lists the API keys and versions the listener
// implements, sorted by key: what ApiVersions advertises.
func SupportedVersions() []APIVersion {
	var out []APIVersion
	for _, h := range handlerTable() {
		out = append(out, APIVersion{Key: h.Key, Name: kmsg.NameForKey(h.Key), MinVersion: h.Min, MaxVersion: h.Max})
	}
	slices.SortFunc(out, func(a, b APIVersion) int { return int(a.Key) - int(b.Key) })
	return out
}
