package quorum

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

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
