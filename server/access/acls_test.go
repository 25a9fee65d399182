package access

import (
	"testing"

	"github.com/runnel/runnel/raftfsm"
)

// The authorizer is reused across images only while the ACLs are the
// same set: one batch of commands may delete an ACL and create another,
// leaving the count unchanged.
func TestSameACLs(t *testing.T) {
	e := func(name string) raftfsm.ACLEntry {
		return raftfsm.ACLEntry{ResourceType: "topic", ResourceName: name, PatternType: "literal", Principal: "User:a", Host: "*", Operation: "read", Permission: "allow"}
	}
	set := func(names ...string) map[string]raftfsm.ACLEntry {
		m := map[string]raftfsm.ACLEntry{}
		for _, n := range names {
			m[e(n).Key()] = e(n)
		}
		return m
	}
	for _, tc := range []struct {
		a, b map[string]raftfsm.ACLEntry
		want bool
	}{
		{set(), set(), true},
		{set("x", "y"), set("y", "x"), true},
		{set("x", "y"), set("x", "z"), false},
		{set("x"), set("x", "y"), false},
		{set("x", "y"), set("x"), false},
	} {
		if got := sameACLs(tc.a, tc.b); got != tc.want {
			t.Errorf("sameACLs(%v, %v) = %v", tc.a, tc.b, got)
		}
	}
}
