package server

import (
	"context"
	"net"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/groups"
	"github.com/runnel/runnel/server/httpdoor"
)

// The HTTP door's adapter is package server/httpdoor; this file wires it:
// the node's pieces as an httpdoor.Config.

// newHTTPDoor builds the door (after the metadata node and the metrics).
func (s *Server) newHTTPDoor() *httpdoor.Door {
	bi := BuildInfo()
	roles := make([]string, len(s.cfg.Roles))
	for i, r := range s.cfg.Roles {
		roles[i] = string(r)
	}
	return httpdoor.New(httpdoor.Config{
		NodeID: s.cfg.NodeID, Roles: roles, Logger: s.logger, Now: s.faults.now,
		Build: api.Build{Version: bi.Version, Commit: bi.Commit, Modified: bi.Modified, GoVersion: bi.GoVersion},
		Meta:  s.meta, Admin: s.admin, Access: s.access, Quotas: s.quotas, Metrics: s.metrics, Storage: s.storage,
		Ready:         s.ready.Load,
		Broker:        func() *broker.Broker { return s.broker },
		Groups:        func() *groups.Coordinator { return s.groups },
		KafkaListener: func() bool { return s.kafka != nil },
		Transactions:  s.listTransactions,
		DialNode: func(ctx context.Context, id int32) (net.Conn, error) {
			return s.meta.DialNode(ctx, id, protoHTTP)
		},
		DialBroker: s.dialBroker,
	})
}

// listTransactions describes this broker's transactional ids in state.
func (s *Server) listTransactions(state string) []kafkaproto.TxnDescription {
	if s.txn == nil {
		return nil
	}
	var f kafkaproto.TxnFilter
	if state != "" {
		f.States = []string{state}
	}
	return s.txn.Coordinator().List(f)
}

// errText is err's message ("": none).
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
