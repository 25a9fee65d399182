package kafkaproto

import "github.com/twmb/franz-go/pkg/kmsg"

// Feature levels (KIP-584): ApiVersions v3+ lists the features this broker
// supports and the levels finalized for the cluster; UpdateFeatures
// (updatefeatures.go) changes a finalized level. runnel supports exactly
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
type feature struct {
	name           string
	min, max       int16 // the supported range
	finalizedLevel int16 // 0: not finalized (left out of FinalizedFeatures)
}

// finalizedFeaturesEpoch is the epoch of the finalized levels: they never
// change, so it never moves.
const finalizedFeaturesEpoch = 0

func features() []feature {
	return []feature{
		{name: "kraft.version", min: 0, max: 0, finalizedLevel: 0},
		{name: "metadata.version", min: 21, max: 21, finalizedLevel: 21},
	}
}

// findFeature returns the feature called name.
func findFeature(name string) (feature, bool) {
	for _, f := range features() {
		if f.name == name {
			return f, true
		}
	}
	return feature{}, false
}

// addFeatures fills the feature fields of an ApiVersions v3+ response.
func addFeatures(resp *kmsg.ApiVersionsResponse) {
	resp.FinalizedFeaturesEpoch = finalizedFeaturesEpoch
	for _, f := range features() {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = f.name, f.min, f.max
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		if f.finalizedLevel > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, f.finalizedLevel, f.finalizedLevel
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		}
	}
}
