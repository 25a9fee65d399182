package coordinators

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/admin"
	"github.com/runnel/runnel/server/txn"
)

type fakeMeta struct{ img *raftfsm.Image }

func (m fakeMeta) Image() (*raftfsm.Image, <-chan struct{}) { return m.img, nil }

// Where a transaction's markers go, in-process: a partition deleted since
// it joined needs none, one without a leader is retried
// (LEADER_NOT_AVAILABLE), one led here is written here, one led elsewhere
// goes to its leader over the inter-broker port (dialled once per leader).
// The leadership the coordinator follows is read from the same image.
func TestTxnMarkerRouting(t *testing.T) {
	img := &raftfsm.Image{Topics: raftfsm.TopicMapOf(
		&raftfsm.Topic{Name: "d", Partitions: []raftfsm.Partition{{Leader: 1}, {Leader: -1}, {Leader: 2}, {Leader: 2}}},
		&raftfsm.Topic{Name: admin.TransactionStateTopic, Partitions: []raftfsm.Partition{{Leader: 1, LeaderEpoch: 4}, {Leader: 2}}},
	)}
	dialled := map[int32]int{}
	tx := &Txn{c: Config{NodeID: 1, Meta: fakeMeta{img}, DialBroker: func(_ context.Context, id int32) (net.Conn, error) {
		dialled[id]++
		return nil, fmt.Errorf("broker %d unreachable", id)
	}}}
	parts := []kafkaproto.TopicPartition{{Topic: "gone", Partition: 0}, {Topic: "d", Partition: 9},
		{Topic: "d", Partition: 1}, {Topic: "d", Partition: 0}, {Topic: "d", Partition: 2}, {Topic: "d", Partition: 3}}
	errs := txnMarkers{tx}.WriteMarkers(context.Background(), txn.Marker{ProducerID: 7, Commit: true}, parts)
	want := []error{nil, nil, kafkaproto.ErrLeaderNotAvailable, kafkaproto.ErrNotLeader, kafkaproto.ErrNotLeader, kafkaproto.ErrNotLeader}
	for i, w := range want {
		if (w == nil) != (errs[i] == nil) || (w != nil && !errors.Is(errs[i], w)) {
			t.Errorf("%v: %v, want %v", parts[i], errs[i], w)
		}
	}
	if dialled[2] != 1 || len(dialled) != 1 {
		t.Errorf("dialled %v, want broker 2 once", dialled)
	}
	n, led := txnLeadership(img, 1)
	if n != 2 || len(led) != 1 || led[0] != 4 {
		t.Errorf("leadership %d %v", n, led)
	}
	c := txnCluster{tx}
	if c.PartitionExists(kafkaproto.TopicPartition{Topic: admin.TransactionStateTopic}) || !c.PartitionExists(kafkaproto.TopicPartition{Topic: "d", Partition: 3}) ||
		c.PartitionExists(kafkaproto.TopicPartition{Topic: "d", Partition: 4}) {
		t.Error("PartitionExists")
	}
}
