package kapi

// Feature levels (KIP-584): ApiVersions v3+ lists the features this broker
// supports and the levels finalized for the cluster; UpdateFeatures
// (kafkaproto/admin) changes a finalized level. runnel supports exactly
// one level of each feature it lists, finalized at that level: it cannot
// switch between levels, so a level is reported only where runnel behaves
// as Kafka does at it.
//
//   - metadata.version 21 (Kafka 3.9-IV0): the metadata semantics of the
//     APIs served (topic ids, Fetch 17, DescribeTopicPartitions, ...).
//   - kraft.version 0: the controller quorum is not changed through
//     Kafka's AddRaftVoter/RemoveRaftVoter (runnel's own `cluster
//     add-controller` does it), so KIP-853's level 1 is not claimed.
//
// transaction.version and group.version are not listed (level 0): clients
// then use the classic transaction protocol and consumer groups, the
// ones served.
type Feature struct {
	Name           string
	Min, Max       int16 // the supported range
	FinalizedLevel int16 // 0: not finalized (left out of FinalizedFeatures)
}

// FinalizedFeaturesEpoch is the epoch of the finalized levels: they never
// change, so it never moves.
const FinalizedFeaturesEpoch = 0

// Features lists the features ApiVersions advertises.
func Features() []Feature {
	return []Feature{
		{Name: "kraft.version", Min: 0, Max: 0, FinalizedLevel: 0},
		{Name: "metadata.version", Min: 21, Max: 21, FinalizedLevel: 21},
	}
}

// FindFeature returns the feature called name.
func FindFeature(name string) (Feature, bool) {
	for _, f := range Features() {
		if f.Name == name {
			return f, true
		}
	}
	return Feature{}, false
}
