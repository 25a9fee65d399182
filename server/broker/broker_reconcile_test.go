package broker

import (
	"log/slog"
	"testing"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"

	"github.com/runnel/runnel/recordbatch"
)

// Two goroutines apply metadata images to the partitions (the metadata
// loop and the ISR loop after a change it proposed); whichever takes the
// lock last must not roll the partitions back to an older image. An older
// image applied after a newer one used to delete a topic created in
// between (its acknowledged records with it) and take a leader back to an
// older leader epoch, so it appended batches with an epoch below the ones
// already in its log.
func TestReconcileIgnoresOlderImages(t *testing.T) {
	b, err := New(Config{NodeID: 1, DataDir: t.TempDir(), Files: segments.NewFileCache(16), Logger: slog.New(slog.DiscardHandler)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	topic := func(name string, id byte, epoch int32) *raftfsm.Topic {
		return &raftfsm.Topic{ID: [16]byte{id}, Name: name, Configs: map[string]string{},
			Partitions: []raftfsm.Partition{{Leader: 1, LeaderEpoch: epoch, Replicas: []int32{1}, ISR: []int32{1}}}}
	}
	old := &raftfsm.Image{Index: 10, Topics: raftfsm.TopicMapOf(topic("a", 1, 0))}
	newer := &raftfsm.Image{Index: 12, Topics: raftfsm.TopicMapOf(topic("a", 1, 3), topic("b", 2, 0))}
	if err := b.Reconcile(newer); err != nil {
		t.Fatal(err)
	}
	p, err := b.Partition("b", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("kept"), Timestamp: 1}})); err != nil {
		t.Fatal(err)
	}
	if err := b.Reconcile(old); err != nil {
		t.Fatal(err)
	}
	hosted := func(name string) *Partition {
		p, _ := b.lookup(name, 0) // made from the applied image if not yet
		return p
	}
	pb := hosted("b")
	if pb == nil {
		t.Fatal("topic b, created by the newer image, was dropped by an older one")
	}
	if end := pb.log().EndOffset(); end != 1 {
		t.Fatalf("topic b's log end %d after an older image, want 1 (its record kept)", end)
	}
	pa := hosted("a")
	if pa == nil {
		t.Fatal("topic a is gone")
	}
	if e := pa.leaderEpoch.Load(); e != 3 {
		t.Fatalf("leader epoch of a went back to %d, want 3", e)
	}
}
