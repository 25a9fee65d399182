package quorum

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/runnel/runnel/internal/testport"
	"github.com/runnel/runnel/raftfsm"
)

// The cluster's command version is raised only when every node reports
// the new one: a node older than versioning reports none (0) and holds the
// cluster at version 1, and so does a configuration nobody answered for.
func TestCommandVersionRaisedOnlyWhenEveryNodeApplies(t *testing.T) {
	v := uint8(raftfsm.CommandVersion)
	for _, c := range []struct {
		versions []uint8
		want     bool
	}{
		{[]uint8{v, v, v}, true},
		{[]uint8{v, v + 1}, true},
		{[]uint8{v, 0, v}, false}, // an older node in a rolling upgrade
		{[]uint8{v, v - 1}, false},
		{nil, false},
	} {
		var sts []raftfsm.Status
		for _, cv := range c.versions {
			sts = append(sts, raftfsm.Status{CommandVersion: cv})
		}
		if got := allApply(sts, v); got != c.want {
			t.Errorf("versions %v: raise %t, want %t", c.versions, got, c.want)
		}
	}
}

// A command forwarded to the active controller with a field this version
// does not know (from a newer node) is refused, not proposed without it;
// before, the RPC decoded it leniently and dropped the field.
func TestForwardedCommandWithUnknownFieldRefused(t *testing.T) {
	n, err := Open(Config{NodeID: 1, Dir: t.TempDir(), BindAddr: testport.FreeAddr(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	apply := n.rpcMethods()["apply"].fn
	before, _ := n.Image()
	_, err = apply(ctx, json.RawMessage(`{"AllocateProducerIDs":{"Count":5,"Reserve":true}}`))
	if !errors.Is(err, raftfsm.ErrUnsupportedCommand) || !errors.Is(err, raftfsm.ErrInvalidCommand) {
		t.Fatalf("forwarded command with an unknown field: %v", err)
	}
	if after, _ := n.Image(); after.NextProducerID != before.NextProducerID {
		t.Fatal("the command was applied without its unknown field")
	}
	if _, err := apply(ctx, json.RawMessage(`{"AllocateProducerIDs":{"Count":5}}`)); err != nil {
		t.Fatalf("forwarded command: %v", err)
	}
}

// Proposals are written in the lowest version that expresses them, so that
// the nodes of a rolling upgrade still on the older release apply them,
// and nothing above the cluster's version is proposed. Before, every
// proposal was written at the newest version the leader knew.
func TestProposalsWrittenInTheirLowestVersion(t *testing.T) {
	n, err := Open(Config{NodeID: 1, Dir: t.TempDir(), BindAddr: testport.FreeAddr(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Apply(ctx, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}}); err != nil {
		t.Fatal(err)
	}
	last, err := n.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := n.logs.GetLog(last, &l); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(l.Data), `{"Version":1,`) {
		t.Fatalf("a version 1 command was written as %s", l.Data)
	}
	batch := raftfsm.Command{Version: 2, ChangePartitionsBatch: &raftfsm.ChangePartitionsBatch{}}
	raise := raftfsm.Command{Version: 2, SetCommandVersion: &raftfsm.SetCommandVersion{Version: 2}}
	v1, v2 := &raftfsm.Image{}, &raftfsm.Image{CommandVersion: 2}
	if err := clusterApplies(v1, batch); !errors.Is(err, raftfsm.ErrInvalidCommand) {
		t.Fatalf("a version 2 command in a version 1 cluster: %v", err)
	}
	if clusterApplies(v1, raise) != nil || clusterApplies(v2, batch) != nil {
		t.Fatal("refused a command the cluster applies")
	}
}
