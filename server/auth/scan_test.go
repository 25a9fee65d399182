package auth

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// scanAllowed is the decision as it was first written: a scan of every
// ACL. The index (New, Allowed) must decide exactly as it does.
func scanAllowed(superUsers []string, acls []ACL, r Request) bool {
	if r.Principal != "" && slices.Contains(superUsers, r.Principal) {
		return true
	}
	allowed := false
	for _, acl := range acls {
		if !scanMatches(acl, r) {
			continue
		}
		if acl.Permission == Deny {
			if denies(acl.Operation, r.Operation) {
				return false
			}
			continue
		}
		if implies(acl.Operation, r.Operation) {
			allowed = true
		}
	}
	return allowed
}

func scanMatches(acl ACL, r Request) bool {
	if acl.ResourceType != r.ResourceType || r.Principal == "" {
		return false
	}
	if acl.Principal != r.Principal && acl.Principal != "User:"+Wildcard {
		return false
	}
	if acl.Host != Wildcard && acl.Host != r.Host {
		return false
	}
	switch acl.PatternType {
	case Literal:
		return acl.ResourceName == r.ResourceName || acl.ResourceName == Wildcard
	case Prefixed:
		return strings.HasPrefix(r.ResourceName, acl.ResourceName)
	}
	return false
}

// The index decides as the scan over random ACL sets drawn from a small
// alphabet (so that names, prefixes, wildcards, hosts, principals, denies
// and implied operations collide often), for every request over the same
// alphabet.
func TestIndexDecidesAsScan(t *testing.T) {
	names := []string{"a", "ab", "abc", "b", "*", "*a", ""}
	principals := []string{"User:x", "User:y", "User:*", ""}
	hosts := []string{"*", "h1", "h2"}
	types := []string{Topic, Group, Cluster, TransactionalID}
	pick := func(rng *rand.Rand, s []string) string { return s[rng.IntN(len(s))] }
	rng := rand.New(rand.NewPCG(1, 2))
	decisions, allowed := 0, 0
	for set := range 300 {
		var acls []ACL
		for range 1 + rng.IntN(12) {
			acls = append(acls, ACL{ResourceType: pick(rng, types[:2]), ResourceName: pick(rng, names), PatternType: pick(rng, []string{Literal, Prefixed, "bogus"}),
				Principal: pick(rng, principals), Host: pick(rng, hosts), Operation: pick(rng, operations), Permission: pick(rng, []string{Allow, Deny, "odd"})})
		}
		supers := []string{"User:root"}
		if set%5 == 0 {
			supers = append(supers, "User:y")
		}
		a := New(supers, acls)
		for _, p := range append(principals, "User:root") {
			for _, h := range hosts {
				for _, rt := range types[:3] {
					for _, n := range append(names, "abcd", "ba") {
						for _, op := range operations {
							r := Request{Principal: p, Host: h, ResourceType: rt, ResourceName: n, Operation: op}
							want := scanAllowed(supers, acls, r)
							if got := a.Allowed(r); got != want {
								t.Fatalf("ACLs %+v\nrequest %+v: index %v, scan %v", acls, r, got, want)
							}
							decisions++
							if want {
								allowed++
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d decisions, %d allowed", decisions, allowed)
}

var benchSink bool

// BenchmarkScanAllowed is the scan the index replaced, for the ratio.
func BenchmarkScanAllowed(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("acls=%d", n), func(b *testing.B) {
			acls := benchACLs(n)
			r := Request{Principal: "User:bench", Host: "127.0.0.1", ResourceType: Topic, ResourceName: "bench-auth", Operation: Read}
			for b.Loop() {
				benchSink = scanAllowed([]string{"User:admin"}, acls, r)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
