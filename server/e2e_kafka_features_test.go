package server_test

import (
	"errors"
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Issue 18: feature levels. ApiVersions v3+ lists the supported features
// and the finalized metadata.version; UpdateFeatures (kadm, and raw v0)
// accepts the finalized level as a no-op and answers any other level, an
// unknown feature or a downgrade without its type INVALID_UPDATE_VERSION,
// a feature named twice INVALID_REQUEST. DescribeQuorum v2 lists the
// voter's endpoint.
func TestKafkaAdminFeaturesAndQuorumNodes(t *testing.T) {
	n := kafkaNode(t)
	adm, _, ctx := adminClient(t, n.KafkaAddr)
	c := rawDial(t, n.KafkaAddr)

	for _, v := range []int16{3, 4} {
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = v, "runnel-test", "1"
		r := rawRoundTrip(t, c, av).(*kmsg.ApiVersionsResponse)
		supported := map[string][2]int16{}
		for _, f := range r.SupportedFeatures {
			supported[f.Name] = [2]int16{f.MinVersion, f.MaxVersion}
		}
		if r.ErrorCode != 0 || supported["metadata.version"] != [2]int16{21, 21} || r.FinalizedFeaturesEpoch < 0 ||
			len(r.FinalizedFeatures) != 1 || r.FinalizedFeatures[0].Name != "metadata.version" || r.FinalizedFeatures[0].MaxVersionLevel != 21 {
			t.Fatalf("ApiVersions v%d features: %+v / %+v", v, r.SupportedFeatures, r.FinalizedFeatures)
		}
	}

	res, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 21, UpgradeType: 1})
	if err != nil || res.Error() != nil {
		t.Fatalf("update to the finalized level: %v %v", err, res.Error())
	}
	for _, tc := range []struct {
		what string
		u    kadm.FeatureUpdate
		want error
	}{
		{"upgrade past the supported level", kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 25, UpgradeType: 1}, kerr.InvalidUpdateVersion},
		{"downgrade as an upgrade", kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 7, UpgradeType: 1}, kerr.InvalidUpdateVersion},
		{"safe downgrade", kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 7, UpgradeType: 2}, kerr.InvalidUpdateVersion},
		{"delete", kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 0, UpgradeType: 3}, kerr.InvalidUpdateVersion},
		{"unknown feature", kadm.FeatureUpdate{Feature: "no.such.feature", MaxVersionLevel: 1, UpgradeType: 1}, kerr.InvalidUpdateVersion},
		{"transactions v2 (not served)", kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1}, kerr.InvalidUpdateVersion},
		{"bad upgrade type", kadm.FeatureUpdate{Feature: "metadata.version", MaxVersionLevel: 21, UpgradeType: 9}, kerr.InvalidRequest},
	} {
		for _, validateOnly := range []bool{true, false} {
			res, err := adm.UpdateFeatures(ctx, validateOnly, tc.u)
			if err == nil {
				err = res.Error()
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("%s (validate only %v): %v, want %v", tc.what, validateOnly, err, tc.want)
			}
		}
	}

	// v0 (AllowDowngrade) and a feature named twice, raw.
	uf := kmsg.NewPtrUpdateFeaturesRequest()
	uf.Version = 0
	uf.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{{Feature: "metadata.version", MaxVersionLevel: 21}}
	if r := rawRoundTrip(t, c, uf).(*kmsg.UpdateFeaturesResponse); r.ErrorCode != 0 || len(r.Results) != 1 || r.Results[0].ErrorCode != 0 {
		t.Fatalf("v0 no-op: %+v", r)
	}
	uf.FeatureUpdates = append(uf.FeatureUpdates, uf.FeatureUpdates[0])
	uf.Version = 1
	r := rawRoundTrip(t, c, uf).(*kmsg.UpdateFeaturesResponse)
	if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || len(r.Results) != 2 || r.Results[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("named twice: %+v", r)
	}

	q := kmsg.NewPtrDescribeQuorumRequest()
	q.Version = 2
	q.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	qr := rawRoundTrip(t, c, q).(*kmsg.DescribeQuorumResponse)
	host, port, _ := net.SplitHostPort(n.RaftAddr)
	if qr.ErrorCode != 0 || len(qr.Nodes) != 1 || qr.Nodes[0].NodeID != 1 || len(qr.Nodes[0].Listeners) != 1 {
		t.Fatalf("quorum v2 nodes: %+v", qr)
	}
	if l := qr.Nodes[0].Listeners[0]; l.Name != "CONTROLLER" || l.Host != host || strconv.Itoa(int(l.Port)) != port {
		t.Fatalf("voter endpoint %+v, want CONTROLLER %s", l, n.RaftAddr)
	}
	if p := qr.Topics[0].Partitions[0]; p.LeaderID != 1 || len(p.CurrentVoters) != 1 {
		t.Fatalf("quorum v2 partition %+v", p)
	}
}
