package raftfsm_test

import (
	"reflect"
	"testing"

	"github.com/runnel/runnel/raftfsm"
)

// FuzzDecodeCommand: decoding raft log bytes (JSON or binary envelope)
// never panics, and what decodes has exactly one command and a supported
// version that expresses it, and (the FSM applies nothing else) a legal
// topic name and bounded counts when it creates one; a decoded binary
// command encodes to bytes that decode to it again.
func FuzzDecodeCommand(f *testing.F) {
	f.Add([]byte(`{"Version":1,"CreateTopic":{"Name":"a","Partitions":1,"ReplicationFactor":1,"Assignments":[[1]]}}`))
	f.Add([]byte(`{"Version":1,"ChangePartition":{"Topic":"a","Partition":0,"Leader":-1,"ISR":[]}}`))
	f.Add([]byte(`{"Version":1,"ReassignPartition":{"Topic":"a","Partition":0,"Action":"start","Target":[2,3]}}`))
	f.Add([]byte(`{"Version":1,"DeleteTopic":{"Name":"a"},"InitCluster":{"ClusterID":"x"}}`))
	f.Add([]byte(`{"Version":2}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"Version":1,"CreateTopic":{"Name":"../../x","Partitions":1,"ReplicationFactor":1,"Assignments":[[1]]}}`))
	f.Add([]byte(`{"Version":1,"CreatePartitions":{"Topic":"a","Count":2147483647}}`))
	f.Add([]byte(`{"Version":2,"SetCommandVersion":{"Version":2}}`))
	f.Add([]byte(`{"Version":1,"DeleteTopic":{"Name":"a","Force":true}}`))
	batch, err := raftfsm.EncodeCommand(raftfsm.Command{ChangePartitionsBatch: &raftfsm.ChangePartitionsBatch{
		Topics: []raftfsm.ChangePartitions{{Topic: "a", Changes: []raftfsm.ChangePartition{{Partition: 1, LeaderEpoch: 2, PartitionEpoch: 3, Leader: 2, ISR: []int32{2, 3}}}}}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(batch)
	f.Add([]byte{0, 3, 1, 0})
	f.Add([]byte{0, 2, 1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := raftfsm.DecodeCommand(data)
		if err != nil {
			return
		}
		if cmd.Version < raftfsm.MinCommandVersion || cmd.Version > raftfsm.CommandVersion || cmd.Version < cmd.MinVersion() {
			t.Fatalf("decoded version %d (command of version %d)", cmd.Version, cmd.MinVersion())
		}
		if len(data) > 0 && data[0] == 0 {
			again, err := raftfsm.EncodeCommand(cmd)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := raftfsm.DecodeCommand(again); err != nil || !reflect.DeepEqual(back, cmd) {
				t.Fatalf("binary command %x: %+v encodes to %x, decoded %+v (%v)", data, cmd, again, back, err)
			}
		}
		if ct := cmd.CreateTopic; ct != nil {
			if err := raftfsm.ValidateTopicName(ct.Name); err != nil {
				t.Fatalf("decoded a CreateTopic with an illegal name: %v", err)
			}
			if err := (raftfsm.Limits{}).CheckTopic(ct.Partitions, ct.ReplicationFactor); err != nil {
				t.Fatalf("decoded a CreateTopic with unbounded counts: %v", err)
			}
		}
		if cp := cmd.CreatePartitions; cp != nil && (cp.Count < 1 || cp.Count > raftfsm.HardMaxPartitionsPerTopic) {
			t.Fatalf("decoded CreatePartitions to %d", cp.Count)
		}
	})
}
