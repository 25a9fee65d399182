package raftfsm

import (
	"maps"
	"testing"
)

// Images share the access maps (users, ACLs, tokens, quotas) until a
// command changes one: a change must copy the map it writes, leaving every
// image published before it as it was, and SameACLs must tell apart images
// whose ACLs a command changed.
func TestAccessChangesLeaveThePreviousImage(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	acl := func(name string) ACLEntry {
		return ACLEntry{ResourceType: "topic", ResourceName: name, PatternType: "literal",
			Principal: "User:alice", Host: "*", Operation: "read", Permission: "allow"}
	}
	index := uint64(0)
	apply := func(cmd Command) *Image {
		t.Helper()
		index++
		if res := applyAt(t, f, index, cmd); isErr(res) {
			t.Fatalf("apply %d: %v", index, res)
		}
		img, _ := f.Image()
		return img
	}
	type access struct {
		users  map[string]*User
		acls   map[string]ACLEntry
		tokens map[string]*Token
		quotas map[string]Quota
	}
	snap := func(img *Image) access {
		return access{maps.Clone(img.Users), maps.Clone(img.ACLs), maps.Clone(img.Tokens), maps.Clone(img.Quotas)}
	}
	same := func(a, b access) bool {
		return maps.Equal(a.users, b.users) && maps.Equal(a.acls, b.acls) && maps.Equal(a.tokens, b.tokens) &&
			maps.EqualFunc(a.quotas, b.quotas, func(x, y Quota) bool { return maps.Equal(x.Values, y.Values) })
	}

	base := apply(Command{CreateACLs: &CreateACLs{ACLs: []ACLEntry{acl("a")}}})
	apply(scramCmd("alice", "SCRAM-SHA-256", 32))
	apply(Command{CreateToken: &CreateToken{Token: Token{ID: "t1", Principal: "User:alice", ExpiresMs: 1 << 50}}})
	apply(Command{SetQuotas: &SetQuotas{Quotas: []Quota{{Entity: QuotaEntity{User: "alice"}, Values: map[string]float64{"producer_byte_rate": 1024}}}}})
	before := apply(reg(1, ""))
	if !before.SameACLs(base) {
		t.Fatal("SameACLs: false across commands that left the ACLs alone")
	}
	published := []*Image{before}
	was := []access{snap(before)}
	prev := before
	for i, cmd := range []Command{
		{CreateACLs: &CreateACLs{ACLs: []ACLEntry{acl("b")}}},
		{DeleteACLs: &DeleteACLs{ACLs: []ACLEntry{acl("a")}}},
		scramCmd("bob", "SCRAM-SHA-256", 32),
		{DeleteUser: &DeleteUser{Name: "alice"}},
		{CreateToken: &CreateToken{Token: Token{ID: "t2", Principal: "User:bob", ExpiresMs: 1 << 50}}},
		{DeleteToken: &DeleteToken{ID: "t1"}},
		{SetQuotas: &SetQuotas{Quotas: []Quota{{Entity: QuotaEntity{User: "alice"}}}}},
		{SetQuotas: &SetQuotas{Quotas: []Quota{{Entity: QuotaEntity{User: "bob"}, Values: map[string]float64{"consumer_byte_rate": 1}}}}},
	} {
		after := apply(cmd)
		for j, img := range published {
			if !same(snap(img), was[j]) {
				t.Fatalf("command %d changed the image published %d commands before it", i, len(published)-j)
			}
		}
		if same(snap(after), was[len(was)-1]) {
			t.Fatalf("command %d changed nothing", i)
		}
		if changedACLs := i < 2; after.SameACLs(prev) == changedACLs {
			t.Fatalf("command %d: SameACLs(previous image) = %v", i, after.SameACLs(prev))
		}
		published, was, prev = append(published, after), append(was, snap(after)), after
	}
	if (&Image{}).SameACLs(&Image{}) {
		t.Fatal("SameACLs: true for images built outside the state machine")
	}
}
