package broker

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
)

// made counts the Partitions the broker made, per topic.
func made(b *Broker) map[string]int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := map[string]int{}
	for name, ht := range b.topics {
		out[name] = len(ht.parts)
	}
	return out
}

func followedBy(b *Broker, leader int32) []*Partition {
	b.fetches.mu.Lock()
	defer b.fetches.mu.Unlock()
	f, ok := b.fetches.byLeader[leader]
	if !ok {
		return nil
	}
	return f.parts.Keys()
}

// TestPartitionsMadeOnFirstUse (issue 19): applying an image (a restart
// with a million partitions) makes no Partition for the replicas this broker
// leads, only for those it follows (their fetchers run); a lookup makes one
// from the image, with the image's leadership, and the count of hosted
// partitions covers the ones not made.
func TestPartitionsMadeOnFirstUse(t *testing.T) {
	dial := func(context.Context, int32) (net.Conn, error) { return nil, errors.New("no leader in this test") }
	b, err := New(Config{NodeID: 1, DataDir: t.TempDir(), Files: segments.NewFileCache(16),
		Logger: slog.New(slog.DiscardHandler), DialLeader: dial}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	led := lazyTopic("led", 1, 100, map[string]string{})
	led.Partitions[3].LeaderEpoch = 7
	followed := lazyTopic("followed", 2, 4, map[string]string{})
	for i := range followed.Partitions {
		followed.Partitions[i] = raftfsm.Partition{Leader: 2, LeaderEpoch: 1, Replicas: []int32{2, 1}, ISR: []int32{2, 1}}
	}
	followed.Partitions[1].Replicas = []int32{2, 3} // not here
	img := &raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(led, followed)}
	if err := b.Reconcile(img); err != nil {
		t.Fatal(err)
	}
	if got := made(b); got["led"] != 0 || got["followed"] != 3 {
		t.Fatalf("partitions made by reconcile: %v, want none of led's 100 and followed's 3 placed here", got)
	}
	if n := len(followedBy(b, 2)); n != 3 {
		t.Fatalf("%d partitions fetched from broker 2, want 3", n)
	}
	if n := b.HostedCount(); n != 103 {
		t.Fatalf("hosted count %d, want 103", n)
	}
	p, err := b.Partition("led", 3)
	if err != nil {
		t.Fatal(err)
	}
	if e := p.LeaderEpoch(); e != 7 {
		t.Fatalf("leader epoch of a partition made on lookup: %d, want the image's 7", e)
	}
	if q, _ := b.Partition("led", 3); q != p {
		t.Fatal("a second lookup made another Partition")
	}
	if _, err := b.Partition("followed", 1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("lookup of a partition placed elsewhere: %v, want ErrNotLeader", err)
	}
	if _, err := b.Partition("led", 100); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("lookup past the last partition: %v, want ErrUnknownPartition", err)
	}
	if got := made(b); got["led"] != 1 {
		t.Fatalf("partitions of led made after one lookup: %d, want 1", got["led"])
	}
	// A later image reaches the made partition, and what a lookup makes
	// next comes from it.
	led2 := lazyTopic("led", 1, 100, map[string]string{})
	for i := range led2.Partitions {
		led2.Partitions[i].LeaderEpoch = 9
	}
	if err := b.Reconcile(&raftfsm.Image{Index: 3, Topics: raftfsm.TopicMapOf(led2, followed)}); err != nil {
		t.Fatal(err)
	}
	if e := p.LeaderEpoch(); e != 9 {
		t.Fatalf("leader epoch of a made partition after an image: %d, want 9", e)
	}
	q, err := b.Partition("led", 50)
	if err != nil || q.LeaderEpoch() != 9 {
		t.Fatalf("partition made after the image: %v epoch %d, want 9", err, q.LeaderEpoch())
	}
}

// Logs written before a restart and not used since belong to partitions
// never made: deleting their topic (or re-creating it under the same name,
// or moving the replica away) still deletes their directories, and the new
// topic of the same name starts empty.
func TestUnmadePartitionsDeleted(t *testing.T) {
	dir := t.TempDir()
	b := lazyTestBroker(t, dir)
	img := &raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(lazyTopic("t", 1, 3, map[string]string{}), lazyTopic("m", 2, 2, map[string]string{}))}
	if err := b.Reconcile(img); err != nil {
		t.Fatal(err)
	}
	for _, tp := range []struct {
		topic string
		idx   int32
	}{{"t", 0}, {"t", 2}, {"m", 1}} {
		p, err := b.Partition(tp.topic, tp.idx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("old"), Timestamp: 1}})); err != nil {
			t.Fatal(err)
		}
	}
	b = restartBroker(t, b, dir, img)
	if got := made(b); got["t"]+got["m"] != 0 {
		t.Fatalf("made after the restart: %v, want none", got)
	}
	// t deleted and created again under another id in one step; m-1 moved
	// to broker 2.
	moved := lazyTopic("m", 2, 2, map[string]string{})
	moved.Partitions[1] = raftfsm.Partition{Leader: 2, LeaderEpoch: 1, Replicas: []int32{2}, ISR: []int32{2}}
	if err := b.Reconcile(&raftfsm.Image{Index: 3, Topics: raftfsm.TopicMapOf(lazyTopic("t", 9, 3, map[string]string{}), moved)}); err != nil {
		t.Fatal(err)
	}
	b.waitDeletions() // deleted off the broker's lock
	if dirs := partitionDirs(t, dir); len(dirs) != 0 {
		t.Fatalf("directories left of the deleted topic and the moved replica: %v", dirs)
	}
	p, err := b.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if end := p.LogEnd(); end != 0 {
		t.Fatalf("the re-created topic's t-0 ends at %d, want 0 (nothing of the old topic)", end)
	}
}

// Lookups making partitions race reconcile applying leadership changes and
// the topic's deletion and re-creation under the same name (run with
// -race): a Partition is made once per topic id and always from the newest
// image applied; every made partition follows the last image; a deleted
// topic's records are never seen by its successor.
func TestMakePartitionRaces(t *testing.T) {
	dir := t.TempDir()
	b := lazyTestBroker(t, dir)
	defer b.Close()
	const parts = 8
	topic := func(id byte, epoch int32) *raftfsm.Topic {
		tp := lazyTopic("r", id, parts, map[string]string{})
		for i := range tp.Partitions {
			tp.Partitions[i].LeaderEpoch = epoch
		}
		return tp
	}
	index := uint64(1)
	apply := func(tp *raftfsm.Topic) {
		index++
		if err := b.Reconcile(&raftfsm.Image{Index: index, Topics: raftfsm.TopicMapOf(tp)}); err != nil {
			t.Error(err)
		}
	}
	apply(topic(1, 0))
	for round := range 20 {
		id := byte(round + 1)
		var wg sync.WaitGroup
		got := make([][]*Partition, 4)
		for w := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range int32(parts) {
					p, err := b.Partition("r", (i+int32(w))%parts)
					if err != nil {
						continue
					}
					got[w] = append(got[w], p)
					// A write to the topic of this round's id, refused
					// once it is deleted.
					if p.topicID == [16]byte{id} {
						p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte(strconv.Itoa(round)), Timestamp: 1}}))
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			apply(topic(id, 1))   // a leadership change
			apply(topic(id+1, 0)) // deleted and created again
		}()
		wg.Wait()
		if t.Failed() {
			return
		}
		// Once per topic id: every lookup of a partition got the one
		// Partition made for it while its topic lived.
		byKey := map[[2]int]*Partition{}
		for _, ps := range got {
			for _, p := range ps {
				k := [2]int{int(p.topicID[0]), int(p.index)}
				if q, ok := byKey[k]; ok && q != p {
					t.Fatalf("round %d: two Partitions made for r-%d of topic id %d", round, p.index, p.topicID[0])
				}
				byKey[k] = p
			}
		}
		for i := range int32(parts) {
			p, err := b.Partition("r", i)
			if err != nil {
				t.Fatal(err)
			}
			if p.topicID != [16]byte{id + 1} || p.LeaderEpoch() != 0 {
				t.Fatalf("round %d: r-%d is of topic id %d epoch %d, want id %d epoch 0", round, i, p.topicID[0], p.LeaderEpoch(), id+1)
			}
			if end := p.LogEnd(); end != 0 {
				t.Fatalf("round %d: the re-created r-%d ends at %d, want 0", round, i, end)
			}
		}
	}
	if got := made(b); got["r"] != parts {
		t.Fatalf("partitions made: %v, want %d of the last topic", got, parts)
	}
	if n := len(b.opened()); n != parts {
		t.Fatalf("%d logs counted open, want %d", n, parts)
	}
	dirs := partitionDirs(t, dir)
	slices.Sort(dirs)
	if len(dirs) != parts {
		t.Fatalf("directories: %v, want the %d of the last topic", dirs, parts)
	}
}
