package auth

import (
	"fmt"
	"testing"
)

// benchACLs returns n ACLs shaped like a busy cluster's: one user per
// 10 ACLs, literal and prefixed topic and group grants, a few denies and
// host-bound entries, plus the benchmark user's own prefixed read.
func benchACLs(n int) []ACL {
	acls := make([]ACL, 0, n)
	ops := []string{Read, Write, Describe, Create, Alter}
	for i := range n - 1 {
		user := fmt.Sprintf("User:u%d", i/10)
		a := ACL{ResourceType: Topic, ResourceName: fmt.Sprintf("topic-%d", i), PatternType: Literal, Principal: user,
			Host: "*", Operation: ops[i%len(ops)], Permission: Allow}
		switch i % 7 {
		case 1:
			a.PatternType, a.ResourceName = Prefixed, fmt.Sprintf("team-%d-", i)
		case 2:
			a.ResourceType, a.ResourceName = Group, fmt.Sprintf("group-%d", i)
		case 3:
			a.Permission = Deny
		case 4:
			a.Host = fmt.Sprintf("10.0.%d.%d", i/256%256, i%256)
		}
		acls = append(acls, a)
	}
	return append(acls, ACL{ResourceType: Topic, ResourceName: "bench-", PatternType: Prefixed, Principal: "User:bench",
		Host: "*", Operation: Read, Permission: Allow})
}

// BenchmarkAllowed: one Fetch's decision (read on a topic) with 100 and
// 10,000 ACLs loaded; decisions/s is the figure to compare.
func BenchmarkAllowed(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("acls=%d", n), func(b *testing.B) {
			a := New([]string{"User:admin"}, benchACLs(n))
			r := Request{Principal: "User:bench", Host: "127.0.0.1", ResourceType: Topic, ResourceName: "bench-auth", Operation: Read}
			b.ReportAllocs()
			for b.Loop() {
				if !a.Allowed(r) {
					b.Fatal("denied")
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// BenchmarkNew: building the index, once per change of the ACLs.
func BenchmarkNew(b *testing.B) {
	acls := benchACLs(10_000)
	b.ReportAllocs()
	for b.Loop() {
		New([]string{"User:admin"}, acls)
	}
}
