package raftfsm_test

import (
	"testing"

	"github.com/runnel/runnel/raftfsm"
)

// FuzzDecodeCommand: decoding raft log bytes never panics, and what decodes
// has exactly one command and the supported version, and (the FSM applies
// nothing else) a legal topic name and bounded counts when it creates one.
func FuzzDecodeCommand(f *testing.F) {
	f.Add([]byte(`{"Version":1,"CreateTopic":{"Name":"a","Partitions":1,"ReplicationFactor":1,"Assignments":[[1]]}}`))
	f.Add([]byte(`{"Version":1,"ChangePartition":{"Topic":"a","Partition":0,"Leader":-1,"ISR":[]}}`))
	f.Add([]byte(`{"Version":1,"ReassignPartition":{"Topic":"a","Partition":0,"Action":"start","Target":[2,3]}}`))
	f.Add([]byte(`{"Version":1,"DeleteTopic":{"Name":"a"},"InitCluster":{"ClusterID":"x"}}`))
	f.Add([]byte(`{"Version":2}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"Version":1,"CreateTopic":{"Name":"../../x","Partitions":1,"ReplicationFactor":1,"Assignments":[[1]]}}`))
	f.Add([]byte(`{"Version":1,"CreatePartitions":{"Topic":"a","Count":2147483647}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := raftfsm.DecodeCommand(data)
		if err != nil {
			return
		}
		if cmd.Version != raftfsm.CommandVersion {
			t.Fatalf("decoded version %d", cmd.Version)
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
