package quorum

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/hashicorp/raft"
	"github.com/runnel/runnel/raftfsm"
)

// RecoverQuorum is the way back when a quorum is lost for good (a majority
// of the controllers destroyed, or a configuration that cannot elect a
// leader): run on a STOPPED node's Config.Dir, it replays the node's
// snapshot and log into its state and rewrites the stored raft
// configuration to voters (hashicorp/raft's RecoverCluster; Kafka's answer
// is re-formatting the controllers). Start the node again afterwards; the
// other voters listed must have been recovered with the same list (or be
// empty and added later with AddVoter). Entries the lost quorum never
// committed may survive on the recovered node, as with RecoverCluster.
// The stores are opened exclusively (badger's directory lock), so a running
// node is refused.
func RecoverQuorum(cfg Config, voters []raftfsm.Server) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	conf, err := recoveryConfiguration(cfg.NodeID, voters)
	if err != nil {
		return err
	}
	n := &Node{cfg: cfg, log: cfg.Logger}
	if err := n.open(); err != nil {
		return errors.Join(err, n.closeStores())
	}
	hl := hclogFor(n.log)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.Dir, dirSnapshots), snapshotsRetained, hl)
	if err != nil {
		return errors.Join(fmt.Errorf("raftfsm: snapshot store: %w", err), n.closeStores())
	}
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(cfg.NodeID)
	rc.Logger = hl
	if err := raft.RecoverCluster(rc, n.fsm, n.logs, n.logs, snaps, trans, conf); err != nil {
		return errors.Join(fmt.Errorf("raftfsm: recover quorum: %w", err), n.closeStores())
	}
	n.log.Info("raftfsm: quorum recovered", "node", cfg.NodeID, "voters", len(conf.Servers), "applied", n.fsm.AppliedIndex())
	return n.closeStores()
}

// recoveryConfiguration checks the new voter set: distinct ids, dialable
// addresses, this node among them.
func recoveryConfiguration(self int32, voters []raftfsm.Server) (raft.Configuration, error) {
	var c raft.Configuration
	seen := map[int32]bool{}
	for _, v := range voters {
		if err := checkServer(v); err != nil {
			return c, err
		}
		if seen[v.ID] {
			return c, fmt.Errorf("%w: controller %d listed twice", raftfsm.ErrInvalidCommand, v.ID)
		}
		seen[v.ID] = true
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: serverID(v.ID), Address: raft.ServerAddress(v.Address)})
	}
	if !seen[self] {
		return c, fmt.Errorf("%w: node %d is not among the new voters", raftfsm.ErrInvalidCommand, self)
	}
	return c, nil
}
