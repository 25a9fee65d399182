package server

import (
	"context"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/access"
)

// The security surface (ACLs and the one authorizer, users, API tokens, UI
// sessions, the HTTP audit log) is package server/access; this file is
// what the server adds around it: its view of the metadata. The doors'
// adapters are server/httpdoor/access.go and server/kafkadoor/access.go.

// newAccess builds the node's security surface.
func (s *Server) newAccess() *access.Access {
	a := s.cfg.Auth
	return access.New(access.Config{Meta: accessMeta{s}, Required: a.Mode == AuthRequired,
		SuperUsers: a.SuperUsers, BootstrapSuperuser: a.BootstrapSuperuser, BootstrapSuperuserPassword: a.BootstrapSuperuserPassword,
		Now: s.faults.now, Logger: s.logger})
}

// accessMeta is access.Metadata: the node's image, proposals with a
// bounded wait that return once this node shows them, and catching up
// with the active controller.
type accessMeta struct{ s *Server }

func (m accessMeta) Image() *raftfsm.Image { img, _ := m.s.meta.Image(); return img }

func (m accessMeta) Apply(ctx context.Context, cmd raftfsm.Command) error {
	_, err := m.s.admin.Apply(ctx, cmd)
	return err
}

// CatchUp is the node's own: raftfsm.ErrNotLeader when no active
// controller answers (Access decides what that means for each call).
func (m accessMeta) CatchUp(ctx context.Context) error { return m.s.meta.CatchUp(ctx) }
