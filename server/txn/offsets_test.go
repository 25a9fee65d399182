package txn

import (
	"errors"
	"fmt"
	"testing"

	"github.com/runnel/runnel/kafkaproto"
)

func commitOffset(topic string, p int32, off int64) kafkaproto.CommitOffset {
	return kafkaproto.CommitOffset{TopicPartition: TopicPartition{Topic: topic, Partition: p}, Offset: off, LeaderEpoch: -1}
}

func TestOffsetStageCommitAbort(t *testing.T) {
	s := NewOffsetStage()
	if err := s.Add(7, 1, "g1", []kafkaproto.CommitOffset{commitOffset("a", 0, 5), commitOffset("a", 1, 9)}); err != nil {
		t.Fatal(err)
	}
	_ = s.Add(7, 1, "g1", []kafkaproto.CommitOffset{commitOffset("a", 0, 6)}) // later offset wins
	_ = s.Add(7, 1, "g2", []kafkaproto.CommitOffset{commitOffset("b", 0, 1)})
	_ = s.Add(8, 0, "g1", []kafkaproto.CommitOffset{commitOffset("a", 2, 3)})
	if !s.Pending("g1", TopicPartition{Topic: "a", Partition: 0}) || s.Pending("g1", TopicPartition{Topic: "b", Partition: 0}) {
		t.Fatal("Pending")
	}
	applied := map[string]string{}
	apply := func(g string, offs []kafkaproto.CommitOffset) error {
		applied[g] = fmt.Sprint(offs)
		return nil
	}
	// A marker for the partition holding g1 only.
	if err := s.Complete(7, true, func(g string) bool { return g == "g1" }, apply); err != nil {
		t.Fatal(err)
	}
	if len(applied) != 1 || applied["g1"] != "[{{a 0} 6 -1 <nil>} {{a 1} 9 -1 <nil>}]" {
		t.Fatalf("applied %v", applied)
	}
	// Abort of producer 7's rest (g2): dropped, never applied.
	if err := s.Complete(7, false, func(string) bool { return true }, apply); err != nil {
		t.Fatal(err)
	}
	if _, ok := applied["g2"]; ok || s.Pending("g2", TopicPartition{Topic: "b", Partition: 0}) {
		t.Fatalf("aborted offsets applied or kept: %v", applied)
	}
	if !s.Pending("g1", TopicPartition{Topic: "a", Partition: 2}) {
		t.Fatal("producer 8's offsets went with 7's")
	}
}

func TestOffsetStageFailedApplyStays(t *testing.T) {
	s := NewOffsetStage()
	_ = s.Add(7, 1, "g1", []kafkaproto.CommitOffset{commitOffset("a", 0, 5)})
	boom := errors.New("boom")
	err := s.Complete(7, true, func(string) bool { return true }, func(string, []kafkaproto.CommitOffset) error { return boom })
	if !errors.Is(err, boom) || !s.Pending("g1", TopicPartition{Topic: "a", Partition: 0}) {
		t.Fatalf("after a failed apply: %v, pending %v", err, s.Pending("g1", TopicPartition{Topic: "a", Partition: 0}))
	}
	n := 0
	if err := s.Complete(7, true, func(string) bool { return true }, func(string, []kafkaproto.CommitOffset) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("retry: %v, %d applies", err, n)
	}
}

func TestOffsetStageFencesOlderEpoch(t *testing.T) {
	s := NewOffsetStage()
	_ = s.Add(7, 1, "g1", []kafkaproto.CommitOffset{commitOffset("a", 0, 5)})
	err := s.Add(7, 0, "g1", []kafkaproto.CommitOffset{commitOffset("a", 0, 9)})
	if !errors.Is(err, kafkaproto.ErrProducerFenced) {
		t.Fatalf("older epoch: %v", err)
	}
	// A newer epoch replaces what the older one staged.
	_ = s.Add(7, 2, "g2", []kafkaproto.CommitOffset{commitOffset("b", 0, 1)})
	if s.Pending("g1", TopicPartition{Topic: "a", Partition: 0}) {
		t.Fatal("epoch 1's offsets survived epoch 2")
	}
}
