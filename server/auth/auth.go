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

// Authorizer decides requests against a set of ACLs. It is a value: the
// server builds one per metadata image, so it is immutable and safe for
// concurrent use.
type Authorizer struct {
	SuperUsers []string // principals that may do anything
	ACLs       []ACL
}

// Allowed is the one authorization decision of both doors.
func (a *Authorizer) Allowed(r Request) bool {
	if r.Principal != "" && slices.Contains(a.SuperUsers, r.Principal) {
		return true
	}
	allowed := false
	for _, acl := range a.ACLs {
		if !acl.matches(r) {
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

// matches reports whether the ACL is about r's principal, host and
// resource (the operation aside).
func (acl ACL) matches(r Request) bool {
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
