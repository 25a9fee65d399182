package kafkaproto

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A follower's session holds every partition it follows from this leader
// (up to Options.MaxReplicaSessionPartitions), not the 10,000 a client's
// may: past that the follower fell back to listing every partition in
// every fetch (issue 19). A client's larger fetch still runs sessionless.
func TestReplicaFetchSessionHoldsMoreThanClients(t *testing.T) {
	const topics, per = maxSessionPartitions/1000 + 1, 1000
	const n = topics * per
	b := newMemBroker()
	for i := range topics {
		mustCreate(t, b, fmt.Sprintf("s%d", i), per)
	}
	s := NewServer(b, Options{MaxReplicaSessionPartitions: n})
	defer s.Close()
	fetch := func(st *connState, replica int32) *fetchReply {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.SessionEpoch, req.MaxBytes = 12, replica, 0, 1<<20
		for i := range topics {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = fmt.Sprintf("s%d", i)
			for p := range int32(per) {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes = p, 1<<10
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		fr := s.fetch(withConnState(context.Background(), st), req)
		t.Cleanup(fr.close)
		return fr
	}
	if fr := fetch(&connState{door: peerDoor, peerID: 2}, 2); fr.ErrorCode != 0 || fr.SessionID == 0 {
		t.Fatalf("follower fetch of %d partitions: error %d, session %d, want a session", n, fr.ErrorCode, fr.SessionID)
	}
	if fr := fetch(&connState{peerID: -1}, -1); fr.ErrorCode != 0 || fr.SessionID != 0 {
		t.Fatalf("client fetch of %d partitions: error %d, session %d, want none", n, fr.ErrorCode, fr.SessionID)
	}
}
