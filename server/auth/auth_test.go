package auth

import (
	"errors"
	"testing"
)

func acl(rt, name, pattern, principal, op, perm string) ACL {
	return ACL{ResourceType: rt, ResourceName: name, PatternType: pattern, Principal: principal, Host: "*", Operation: op, Permission: perm}
}

func TestAllowed(t *testing.T) {
	a := New([]string{"User:root"}, []ACL{
		acl(Topic, "orders", Literal, "User:alice", Write, Allow),
		acl(Topic, "logs-", Prefixed, "User:alice", Read, Allow),
		acl(Topic, "logs-secret", Literal, "User:alice", Read, Deny),
		acl(Topic, "*", Literal, "User:*", Describe, Allow),
		acl(Topic, "audit", Literal, "User:bob", All, Allow),
		acl(Topic, "audit", Literal, "User:bob", Delete, Deny),
		acl(Group, "g", Literal, "User:alice", Read, Allow),
		acl(Cluster, ClusterName, Literal, "User:ops", AlterConfigs, Allow),
		{ResourceType: Topic, ResourceName: "lan", PatternType: Literal, Principal: "User:carol", Host: "10.0.0.1", Operation: Read, Permission: Allow},
	})
	for _, tc := range []struct {
		principal, host, rt, name, op string
		want                          bool
	}{
		{"User:root", "1.2.3.4", Topic, "anything", Delete, true},
		{"User:alice", "h", Topic, "orders", Write, true},
		{"User:alice", "h", Topic, "orders", Read, false},
		{"User:alice", "h", Topic, "orders", Describe, true}, // implied by write, and User:* describe
		{"User:alice", "h", Topic, "logs-app", Read, true},
		{"User:alice", "h", Topic, "logs-secret", Read, false}, // deny wins
		{"User:alice", "h", Topic, "log", Read, false},
		{"User:dave", "h", Topic, "x", Describe, true}, // wildcard principal and name
		{"User:dave", "h", Topic, "x", Read, false},    // no ACL: deny
		{"", "h", Topic, "x", Describe, false},         // anonymous matches nothing
		{"User:bob", "h", Topic, "audit", Write, true},
		{"User:bob", "h", Topic, "audit", Delete, false},
		{"User:alice", "h", Group, "g", Read, true},
		{"User:alice", "h", Group, "g", Describe, true},
		{"User:alice", "h", Group, "h", Read, false},
		{"User:ops", "h", Cluster, ClusterName, DescribeConfigs, true},
		{"User:ops", "h", Cluster, ClusterName, Alter, false},
		{"User:carol", "10.0.0.1", Topic, "lan", Read, true},
		{"User:carol", "10.0.0.2", Topic, "lan", Read, false},
	} {
		r := Request{Principal: tc.principal, Host: tc.host, ResourceType: tc.rt, ResourceName: tc.name, Operation: tc.op}
		if got := a.Allowed(r); got != tc.want {
			t.Errorf("%+v: allowed %v, want %v", r, got, tc.want)
		}
	}
}

func TestCheckAndFilter(t *testing.T) {
	good := acl(Topic, "t", Literal, "User:a", Read, Allow)
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []ACL{
		acl("broker", "t", Literal, "User:a", Read, Allow),
		acl(Topic, "t", "match", "User:a", Read, Allow),
		acl(Topic, "t", Literal, "alice", Read, Allow),
		acl(Topic, "t", Literal, "User:a", "fly", Allow),
		acl(Topic, "t", Literal, "User:a", Read, "maybe"),
		acl(Topic, "", Literal, "User:a", Read, Allow),
		acl(Cluster, "c", Literal, "User:a", Alter, Allow),
	} {
		if err := bad.Check(); !errors.Is(err, ErrInvalidACL) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if !(Filter{}).Matches(good) || !(Filter{Principal: "User:a", Operation: Read}).Matches(good) || (Filter{Principal: "User:b"}).Matches(good) {
		t.Fatal("filter")
	}
}
