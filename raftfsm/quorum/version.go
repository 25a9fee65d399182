package quorum

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/runnel/runnel/raftfsm"
)

// The cluster's command version (raftfsm's command.go has the rules): the
// active controller raises it to this binary's raftfsm.CommandVersion once
// every server of the raft configuration, voters and non-voters (every node
// that applies the log), reports that it applies that version. Until then
// the controller writes nothing newer: in a rolling upgrade the old nodes
// keep applying what the new ones propose. A node older than versioning
// reports no version and holds the cluster at version 1.

// versionCheckEvery is how often a node that leads checks whether the
// cluster's version can be raised.
const versionCheckEvery = time.Second

// versionLoop raises the cluster's command version while this node leads;
// it returns once the version is this binary's (nothing is left to raise).
func (n *Node) versionLoop(ctx context.Context) {
	tick := time.NewTicker(versionCheckEvery)
	defer tick.Stop()
	var blocked string // why it was not raised last, logged when it changes
	for {
		if img, _ := n.Image(); img.CommandVersion >= raftfsm.CommandVersion {
			return
		}
		if n.isLeader() {
			if why := n.raiseCommandVersion(ctx); why != blocked && why != "" {
				n.log.Info("raftfsm: command version not raised yet", "version", raftfsm.CommandVersion, "waiting_for", why)
				blocked = why
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// raiseCommandVersion proposes SetCommandVersion when every server
// supports this binary's version; else it says what it waits for.
func (n *Node) raiseCommandVersion(ctx context.Context) string {
	want := uint8(raftfsm.CommandVersion)
	statuses, ok := n.serverStatuses(ctx)
	if !ok {
		return "a node of the raft configuration to answer"
	}
	if !allApply(statuses, want) {
		return "every node to run a release that applies it"
	}
	actx, cancel := context.WithTimeout(ctx, defaultApplyTimeout)
	defer cancel()
	if _, err := n.applyLocal(actx, raftfsm.Command{SetCommandVersion: &raftfsm.SetCommandVersion{Version: want}}); err != nil {
		n.log.Warn("raftfsm: cannot raise the command version", "version", want, "err", err)
		return ""
	}
	n.log.Info("raftfsm: every node applies the command version, raised", "version", want, "nodes", len(statuses))
	return ""
}

// allApply: every status reports a command version of at least v.
func allApply(statuses []raftfsm.Status, v uint8) bool {
	for _, st := range statuses {
		if st.CommandVersion < v {
			return false
		}
	}
	return len(statuses) > 0
}

// serverStatuses asks every server of the raft configuration for its
// Status; ok is false when one does not answer.
func (n *Node) serverStatuses(ctx context.Context) ([]raftfsm.Status, bool) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	servers := f.Configuration().Servers
	out := make([]raftfsm.Status, len(servers))
	answered := make([]bool, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		if s.ID == serverID(n.cfg.NodeID) {
			out[i], answered[i] = n.Status(), true
			continue
		}
		wg.Add(1)
		go func(s raft.Server) { // bounded by the timeout; waited for below
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, statusTimeout)
			defer cancel()
			answered[i] = n.callAddr(cctx, string(s.Address), "status", 0, struct{}{}, &out[i]) == nil
		}(s)
	}
	wg.Wait()
	for _, a := range answered {
		if !a {
			return nil, false
		}
	}
	return out, true
}
