// Package auth is runnel's one authorizer: Kafka's ACL model (resource
// type, name and pattern, principal, host, operation, allow|deny) and the
// decision both front doors ask for. It imports no other runnel package;
// the server maps Kafka APIs and HTTP endpoints to the operations here.
//
// Decision (as Kafka's StandardAuthorizer with
// allow.everyone.if.no.acl.found=false): a superuser may do anything;
// otherwise the ACLs matching the principal (or User:*), the host (or *)
// and the resource (a literal name, the literal "*", or a prefix) decide:
// any matching DENY wins, else any matching ALLOW allows, else it is
// denied. ALLOW on read, write, delete or alter implies describe; ALLOW on
// alter_configs implies describe_configs; "all" matches every operation.
package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Resource types.
const (
	Topic           = "topic"
	Group           = "group"
	Cluster         = "cluster"
	TransactionalID = "transactional_id"
)

// ClusterName is the name of the one cluster resource (Kafka's).
const ClusterName = "kafka-cluster"

// Operations.
const (
	Read            = "read"
	Write           = "write"
	Create          = "create"
	Delete          = "delete"
	Alter           = "alter"
	Describe        = "describe"
	DescribeConfigs = "describe_configs"
	AlterConfigs    = "alter_configs"
	ClusterAction   = "cluster_action"
	IdempotentWrite = "idempotent_write"
	All             = "all"
)

// Pattern types and permissions.
const (
	Literal  = "literal"
	Prefixed = "prefixed"
	Allow    = "allow"
	Deny     = "deny"
	// Wildcard is the resource name, principal ("User:*") or host matching any.
	Wildcard = "*"
)

var (
	resourceTypes = []string{Topic, Group, Cluster, TransactionalID}
	operations    = []string{Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs, ClusterAction, IdempotentWrite, All}
	patterns      = []string{Literal, Prefixed}
	permissions   = []string{Allow, Deny}
)

// ErrInvalidACL: an ACL with an unknown type, operation, pattern or
// permission, or an empty name, principal or host.
var ErrInvalidACL = errors.New("invalid ACL")

// ACL is one access control entry; the JSON tags are the HTTP shape.
type ACL struct {
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
}

// Check validates an ACL.
func (a ACL) Check() error {
	switch {
	case !slices.Contains(resourceTypes, a.ResourceType):
		return fmt.Errorf("%w: resource_type %q (want one of %s)", ErrInvalidACL, a.ResourceType, strings.Join(resourceTypes, ", "))
	case !slices.Contains(patterns, a.PatternType):
		return fmt.Errorf("%w: pattern_type %q (want literal or prefixed)", ErrInvalidACL, a.PatternType)
	case !slices.Contains(operations, a.Operation):
		return fmt.Errorf("%w: operation %q (want one of %s)", ErrInvalidACL, a.Operation, strings.Join(operations, ", "))
	case !slices.Contains(permissions, a.Permission):
		return fmt.Errorf("%w: permission %q (want allow or deny)", ErrInvalidACL, a.Permission)
	case a.ResourceName == "" || a.Host == "":
		return fmt.Errorf("%w: empty resource_name or host", ErrInvalidACL)
	case !strings.HasPrefix(a.Principal, "User:") || a.Principal == "User:":
		return fmt.Errorf("%w: principal %q (want User:<name> or User:*)", ErrInvalidACL, a.Principal)
	case a.ResourceType == Cluster && a.ResourceName != ClusterName:
		return fmt.Errorf("%w: the cluster resource is named %q", ErrInvalidACL, ClusterName)
	}
	return nil
}

// Request is one access to decide.
type Request struct {
	Principal    string // "User:alice"; "" anonymous
	Host         string // the client's IP address
	ResourceType string
	ResourceName string
	Operation    string
}

// Authorizer decides requests against a set of ACLs. The server builds
// one (New) per set of ACLs, so it is immutable and safe for concurrent
// use.
//
// Every request of both doors asks it (a Fetch once per topic, a Metadata
// answer once per topic listed), so a decision must not cost a scan of all
// ACLs: they are indexed by principal, resource type and name (literal
// names in a map, prefixes in a map probed at each distinct prefix length
// in use), and a decision reads only the few entries that can match it.
type Authorizer struct {
	superUsers  map[string]bool
	byPrincipal map[string]*principalACLs // "User:alice", "User:*"
}

// principalACLs are one principal's ACLs by resource type.
type principalACLs struct {
	byType map[string]*resourceACLs
}

// resourceACLs are the ACLs on one resource type: literal by name (the
// name "*" is the literal wildcard), prefixed by prefix.
type resourceACLs struct {
	literal    map[string][]rule
	prefixed   map[string][]rule
	prefixLens []int // the distinct lengths of the prefixes, ascending
}

// rule is what is left of an ACL once its principal, type and name
// placed it in the index.
type rule struct {
	host, op string
	deny     bool
}

// New returns the authorizer of superUsers (principals that may do
// anything) and acls. ACLs with an unknown pattern type match nothing, as
// they never did.
func New(superUsers []string, acls []ACL) *Authorizer {
	a := &Authorizer{superUsers: make(map[string]bool, len(superUsers)), byPrincipal: map[string]*principalACLs{}}
	for _, u := range superUsers {
		a.superUsers[u] = true
	}
	for _, acl := range acls {
		if acl.PatternType != Literal && acl.PatternType != Prefixed {
			continue
		}
		p := a.byPrincipal[acl.Principal]
		if p == nil {
			p = &principalACLs{byType: map[string]*resourceACLs{}}
			a.byPrincipal[acl.Principal] = p
		}
		r := p.byType[acl.ResourceType]
		if r == nil {
			r = &resourceACLs{literal: map[string][]rule{}, prefixed: map[string][]rule{}}
			p.byType[acl.ResourceType] = r
		}
		ru := rule{host: acl.Host, op: acl.Operation, deny: acl.Permission == Deny}
		if acl.PatternType == Literal {
			r.literal[acl.ResourceName] = append(r.literal[acl.ResourceName], ru)
			continue
		}
		if len(r.prefixed[acl.ResourceName]) == 0 && !slices.Contains(r.prefixLens, len(acl.ResourceName)) {
			r.prefixLens = append(r.prefixLens, len(acl.ResourceName))
		}
		r.prefixed[acl.ResourceName] = append(r.prefixed[acl.ResourceName], ru)
	}
	for _, p := range a.byPrincipal {
		for _, r := range p.byType {
			slices.Sort(r.prefixLens)
		}
	}
	return a
}

// Allowed is the one authorization decision of both doors.
func (a *Authorizer) Allowed(r Request) bool {
	if r.Principal == "" {
		return false // anonymous: no ACL is about it, and it is no superuser
	}
	if a.superUsers[r.Principal] {
		return true
	}
	allowed := false
	for i, principal := range [2]string{r.Principal, anyUser} {
		if i == 1 && r.Principal == anyUser {
			break
		}
		p := a.byPrincipal[principal]
		if p == nil {
			continue
		}
		res := p.byType[r.ResourceType]
		if res == nil {
			continue
		}
		deny, allow := decide(res.literal[r.ResourceName], r)
		if r.ResourceName != Wildcard {
			d, al := decide(res.literal[Wildcard], r)
			deny, allow = deny || d, allow || al
		}
		for _, n := range res.prefixLens {
			if n > len(r.ResourceName) {
				break
			}
			d, al := decide(res.prefixed[r.ResourceName[:n]], r)
			deny, allow = deny || d, allow || al
		}
		if deny {
			return false // any matching DENY wins
		}
		allowed = allowed || allow
	}
	return allowed
}

// anyUser is the principal an ACL names to be about everyone.
const anyUser = "User:" + Wildcard

// decide reports whether rules (all about r's principal and resource)
// hold a DENY or an ALLOW that applies to r's host and operation.
func decide(rules []rule, r Request) (deny, allow bool) {
	for _, ru := range rules {
		if ru.host != Wildcard && ru.host != r.Host {
			continue
		}
		if ru.deny {
			deny = deny || denies(ru.op, r.Operation)
		} else {
			allow = allow || implies(ru.op, r.Operation)
		}
	}
	return deny, allow
}

// implies reports whether an ALLOW for op grants want.
func implies(op, want string) bool {
	switch {
	case op == All || op == want:
		return true
	case want == Describe:
		return op == Read || op == Write || op == Delete || op == Alter
	case want == DescribeConfigs:
		return op == AlterConfigs
	}
	return false
}

// denies reports whether a DENY for op refuses want.
func denies(op, want string) bool { return op == All || op == want }

// Filter selects ACLs (DescribeAcls, DeleteAcls); an empty field matches
// any value.
type Filter struct {
	ResourceType string `json:"resource_type,omitempty"`
	ResourceName string `json:"resource_name,omitempty"`
	PatternType  string `json:"pattern_type,omitempty"`
	Principal    string `json:"principal,omitempty"`
	Host         string `json:"host,omitempty"`
	Operation    string `json:"operation,omitempty"`
	Permission   string `json:"permission,omitempty"`
}

// Matches reports whether acl is selected by f.
func (f Filter) Matches(acl ACL) bool {
	eq := func(want, got string) bool { return want == "" || want == got }
	return eq(f.ResourceType, acl.ResourceType) && eq(f.ResourceName, acl.ResourceName) &&
		eq(f.PatternType, acl.PatternType) && eq(f.Principal, acl.Principal) && eq(f.Host, acl.Host) &&
		eq(f.Operation, acl.Operation) && eq(f.Permission, acl.Permission)
}
