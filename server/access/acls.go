package access

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/auth"
)

// ACLs live in the metadata log (raftfsm.CreateACLs/DeleteACLs); the
// decision is auth.Authorizer's, built when the ACLs change and asked by
// both doors (Allowed). Under --auth none nothing is authorized: every
// client may do everything.

// authzCache is the authorizer of the last image it was asked for.
type authzCache struct {
	cur atomic.Pointer[authzEntry]
}

type authzEntry struct {
	img  *raftfsm.Image
	acls map[string]raftfsm.ACLEntry // the ACLs a was built from
	a    *auth.Authorizer
}

func toAuthACL(e raftfsm.ACLEntry) auth.ACL {
	return auth.ACL{ResourceType: e.ResourceType, ResourceName: e.ResourceName, PatternType: e.PatternType,
		Principal: e.Principal, Host: e.Host, Operation: e.Operation, Permission: e.Permission}
}

func toEntry(a auth.ACL) raftfsm.ACLEntry {
	return raftfsm.ACLEntry{ResourceType: a.ResourceType, ResourceName: a.ResourceName, PatternType: a.PatternType,
		Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.Permission}
}

// authorizer returns the authorizer of the current metadata. Every
// metadata command publishes a new image (a partition's leader or ISR
// changes, a producer id block, a topic): the index is rebuilt only when
// the image's ACLs differ from those it was built from. The state machine
// shares one ACL map between images until a command changes the ACLs, so
// SameACLs answers that at once; the entry-by-entry comparison is left for
// images that do not share it (a restore, images built elsewhere).
func (a *Access) authorizer() *auth.Authorizer {
	img := a.cfg.Meta.Image()
	e := a.authz.cur.Load()
	if e != nil && e.img == img {
		return e.a
	}
	if e != nil && (img.SameACLs(e.img) || sameACLs(e.acls, img.ACLs)) {
		a.authz.cur.Store(&authzEntry{img: img, acls: img.ACLs, a: e.a})
		return e.a
	}
	superUsers := append([]string(nil), a.cfg.SuperUsers...)
	if u := a.cfg.BootstrapSuperuser; u != "" {
		superUsers = append(superUsers, "User:"+u)
	}
	acls := make([]auth.ACL, 0, len(img.ACLs))
	for _, e := range img.ACLs {
		acls = append(acls, toAuthACL(e))
	}
	az := auth.New(superUsers, acls)
	a.authz.cur.Store(&authzEntry{img: img, acls: img.ACLs, a: az})
	return az
}

// sameACLs: a and b hold the same entries (the key is every field).
func sameACLs(a, b map[string]raftfsm.ACLEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			return false
		}
	}
	return true
}

// Allowed is the one authorization check of both doors.
func (a *Access) Allowed(principal, host, resourceType, name, op string) bool {
	if !a.cfg.Required {
		return true
	}
	return a.authorizer().Allowed(auth.Request{Principal: principal, Host: host, ResourceType: resourceType, ResourceName: name, Operation: op})
}

// ListACLs returns the ACLs f matches, sorted by key.
func (a *Access) ListACLs(f auth.Filter) []auth.ACL {
	img := a.cfg.Meta.Image()
	var out []auth.ACL
	for _, e := range img.ACLs {
		if acl := toAuthACL(e); f.Matches(acl) {
			out = append(out, acl)
		}
	}
	sort.Slice(out, func(i, j int) bool { return toEntry(out[i]).Key() < toEntry(out[j]).Key() })
	return out
}

// CreateACLs checks acls and proposes them (auth.ErrInvalidACL).
func (a *Access) CreateACLs(ctx context.Context, acls []auth.ACL) error {
	entries := make([]raftfsm.ACLEntry, len(acls))
	for i, acl := range acls {
		if err := acl.Check(); err != nil {
			return err
		}
		entries[i] = toEntry(acl)
	}
	return a.cfg.Meta.Apply(ctx, raftfsm.Command{CreateACLs: &raftfsm.CreateACLs{ACLs: entries}})
}

// DeleteACLs removes the ACLs f selects now and returns them. The filter
// is resolved against this node's metadata once caught up with the active
// controller (what it had committed when asked, so every ACL created before
// the call began): a node whose image lags would miss ACLs created meanwhile
// through another node and answer "nothing matched" (issue 20). Without a
// controller to ask, the outcome is not known: raftfsm.ErrNotLeader.
func (a *Access) DeleteACLs(ctx context.Context, f auth.Filter) ([]auth.ACL, error) {
	if err := a.cfg.Meta.CatchUp(ctx); err != nil {
		return nil, fmt.Errorf("delete ACLs: catch up with the active controller: %w", err)
	}
	acls := a.ListACLs(f)
	if len(acls) == 0 {
		return nil, nil
	}
	if len(acls) > raftfsm.MaxACLsPerCommand {
		return nil, fmt.Errorf("%w: the filter selects %d ACLs, at most %d go at once", auth.ErrInvalidACL, len(acls), raftfsm.MaxACLsPerCommand)
	}
	entries := make([]raftfsm.ACLEntry, len(acls))
	for i, acl := range acls {
		entries[i] = toEntry(acl)
	}
	err := a.cfg.Meta.Apply(ctx, raftfsm.Command{DeleteACLs: &raftfsm.DeleteACLs{ACLs: entries}})
	return acls, err
}
