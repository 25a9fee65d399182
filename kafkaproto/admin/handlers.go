package admin

import (
	"github.com/runnel/runnel/kafkaproto/kapi"
)

// Handlers lists the admin APIs with the versions they serve, by key; the
// listener's table (kafkaproto/handlers.go) takes them in. Each entry's
// constants and functions live in the file named after the API.
func Handlers() []kapi.Handler {
	return []kapi.Handler{
		kapi.Handle(createTopicsKey, createTopicsMin, createTopicsMax, createTopics, createTopicsError),
		kapi.Handle(deleteTopicsKey, deleteTopicsMin, deleteTopicsMax, deleteTopics, deleteTopicsError),
		kapi.Handle(deleteRecordsKey, deleteRecordsMin, deleteRecordsMax, deleteRecords, deleteRecordsError),
		kapi.Handle(describeACLsKey, describeACLsMin, describeACLsMax, describeACLs, describeACLsError),
		kapi.Handle(createACLsKey, createACLsMin, createACLsMax, createACLs, createACLsError),
		kapi.Handle(deleteACLsKey, deleteACLsMin, deleteACLsMax, deleteACLs, deleteACLsError),
		kapi.Handle(describeConfigsKey, describeConfigsMin, describeConfigsMax, describeConfigs, describeConfigsError),
		kapi.Handle(alterConfigsKey, alterConfigsMin, alterConfigsMax, alterConfigs, alterConfigsError),
		kapi.Handle(alterReplicaLogDirsKey, alterReplicaLogDirsMin, alterReplicaLogDirsMax, alterReplicaLogDirs, alterReplicaLogDirsError),
		kapi.Handle(describeLogDirsKey, describeLogDirsMin, describeLogDirsMax, describeLogDirs, describeLogDirsError),
		kapi.Handle(createPartitionsKey, createPartitionsMin, createPartitionsMax, createPartitions, createPartitionsError),
		kapi.Handle(electLeadersKey, electLeadersMin, electLeadersMax, electLeaders, electLeadersError),
		kapi.Handle(incrementalAlterConfigsKey, incrementalAlterConfigsMin, incrementalAlterConfigsMax, incrementalAlterConfigs, incrementalAlterConfigsError),
		kapi.Handle(alterPartitionReassignmentsKey, alterPartitionReassignmentsMin, alterPartitionReassignmentsMax, alterPartitionReassignments, alterPartitionReassignmentsError),
		kapi.Handle(listPartitionReassignmentsKey, listPartitionReassignmentsMin, listPartitionReassignmentsMax, listPartitionReassignments, listPartitionReassignmentsError),
		kapi.Handle(describeClientQuotasKey, describeClientQuotasMin, describeClientQuotasMax, describeClientQuotas, describeClientQuotasError),
		kapi.Handle(alterClientQuotasKey, alterClientQuotasMin, alterClientQuotasMax, alterClientQuotas, alterClientQuotasError),
		kapi.Handle(describeQuorumKey, describeQuorumMin, describeQuorumMax, describeQuorum, describeQuorumError),
		kapi.Handle(updateFeaturesKey, updateFeaturesMin, updateFeaturesMax, updateFeatures, updateFeaturesError),
		kapi.Handle(describeClusterKey, describeClusterMin, describeClusterMax, describeCluster, describeClusterError),
		kapi.Handle(describeProducersKey, describeProducersMin, describeProducersMax, describeProducers, describeProducersError),
		kapi.Handle(listConfigResourcesKey, listConfigResourcesMin, listConfigResourcesMax, listConfigResources, listConfigResourcesError),
	}
}

// Helpers shared by the admin APIs.

// quotaAdmin returns the broker's QuotaAdmin.
func quotaAdmin(env kapi.Env) (kapi.QuotaAdmin, bool) {
	a, ok := env.Broker().(kapi.QuotaAdmin)
	return a, ok
}

// orEmpty makes a nil replica list an empty one: the responses' arrays are
// not nullable.
func orEmpty(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
