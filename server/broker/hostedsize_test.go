package broker

import (
	"testing"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
)

// TestListingsMakeNoPartitions (issue 19): the topic list's sizes and
// DescribeLogDirs report every hosted partition, one written before a
// restart included, without making a Partition for those not used since
// the start (they were made for every hosted replica of every listed
// topic, and kept).
func TestListingsMakeNoPartitions(t *testing.T) {
	dir := t.TempDir()
	img := &raftfsm.Image{Index: 5, Topics: raftfsm.TopicMapOf(lazyTopic("idle", 1, 50, map[string]string{}), lazyTopic("a", 2, 3, map[string]string{}))}
	b := lazyTestBroker(t, dir)
	if err := b.Reconcile(img); err != nil {
		t.Fatal(err)
	}
	p, err := b.Partition("a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("kept"), Timestamp: 1}})); err != nil {
		t.Fatal(err)
	}
	b = restartBroker(t, b, dir, img)
	idle, a := b.TopicSizeBytes("idle"), b.TopicSizeBytes("a")
	logs := b.HostedLogs()
	if got := made(b); got["idle"] != 0 || got["a"] != 0 {
		t.Fatalf("partitions made by the listings: %v, want none", got)
	}
	if idle != 0 || a <= 0 {
		t.Fatalf("sizes: idle %d, a %d; want 0 and a-1's batch", idle, a)
	}
	if len(logs) != 53 || logs[0].Topic != "a" || logs[1].Partition != 1 || logs[1].Size != a || logs[3].Topic != "idle" {
		t.Fatalf("hosted logs: %d, first %+v", len(logs), logs[:4])
	}
	// Once made (and read), a partition's size comes from its log.
	if _, err := b.Partition("a", 1); err != nil {
		t.Fatal(err)
	}
	if got := b.TopicSizeBytes("a"); got != a {
		t.Fatalf("size of a with a-1 made: %d, want %d", got, a)
	}
	if got := b.HostedLogs()[1]; got.Size != a || got.OffsetLag != 0 {
		t.Fatalf("a-1 made: %+v", got)
	}
	if b.TopicSizeBytes("missing") != 0 {
		t.Fatal("a size for a topic that does not exist")
	}
}
