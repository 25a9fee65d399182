package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// HTTP authorization (--auth required): each endpoint needs the operation
// on the resource that the Kafka API doing the same needs (produce: write
// topic, consume: read topic, ...); see Permissions. The decision is the
// server's one authorizer, shared with the Kafka listener.

// ErrForbidden: the principal lacks a permission; 403.
var ErrForbidden = errors.New("api: forbidden")

// Permission is an operation on a resource, in Kafka's ACL terms.
type Permission struct {
	ResourceType string // topic, group, cluster, transactional_id
	ResourceName string
	Operation    string // read, write, create, delete, alter, describe, ...
}

// The one cluster resource's name (Kafka's).
const kafkaClusterName = "kafka-cluster"

// Authorizer decides permissions. Safe for concurrent use.
type Authorizer interface {
	Allowed(ctx context.Context, principal, host string, p Permission) bool
}

// Permissions lists what a request needs; none for the paths any
// authenticated client may use (lists are filtered by the backend, the
// UI's assets).
func Permissions(method, path string) []Permission {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	cluster := func(op string) []Permission { return []Permission{{"cluster", kafkaClusterName, op}} }
	write := method != http.MethodGet && method != http.MethodHead
	if path == "/metrics" {
		return cluster("describe")
	}
	if len(seg) < 2 || seg[0] != "v1" {
		return nil
	}
	switch seg[1] {
	case "topics":
		return topicPermissions(method, seg[2:])
	case "groups":
		return groupPermissions(method, seg[2:])
	case "cluster", "users", "acls":
		if write {
			return cluster("alter")
		}
		return cluster("describe")
	case "quotas": // Kafka: DescribeClientQuotas / AlterClientQuotas
		if write {
			return cluster("alter_configs")
		}
		return cluster("describe_configs")
	case "brokers", "kafka", "stats", "transactions":
		return cluster("describe")
	}
	return nil
}

func topicPermissions(method string, rest []string) []Permission {
	if len(rest) == 0 {
		if method == http.MethodPost {
			return []Permission{{"cluster", kafkaClusterName, "create"}}
		}
		return nil // the list shows the topics the principal may describe
	}
	topic := func(op string) []Permission { return []Permission{{"topic", rest[0], op}} }
	switch {
	case len(rest) == 1 && method == http.MethodDelete:
		return topic("delete")
	case len(rest) == 1:
		return topic("describe")
	case rest[1] == "configs":
		return topic("alter_configs")
	case rest[1] == "records" && method == http.MethodPost:
		return topic("write")
	case rest[1] == "records" || rest[len(rest)-1] == "records":
		return topic("read")
	case rest[1] == "elect-leaders" || rest[len(rest)-1] == "replicas":
		return []Permission{{"cluster", kafkaClusterName, "alter"}} // Kafka's ElectLeaders and reassignments
	}
	return topic("describe")
}

func groupPermissions(method string, rest []string) []Permission {
	if len(rest) == 0 {
		return []Permission{{"cluster", kafkaClusterName, "describe"}} // Kafka's ListGroups
	}
	group := func(op string) []Permission { return []Permission{{"group", rest[0], op}} }
	switch {
	case len(rest) == 1 && method == http.MethodDelete:
		return group("delete")
	case method == http.MethodGet && (len(rest) == 1 || rest[1] == "offsets"):
		return group("describe")
	}
	return group("read") // commits, resets, members
}

// Authorize refuses (403 problem+json naming the missing permission) a
// request whose principal lacks a permission it needs. It runs after
// Authenticate; trusted requests (forwarded by another node, which
// authorized them) pass.
func Authorize(a Authorizer, trusted func(*http.Request) bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if trusted != nil && trusted(r) {
				next.ServeHTTP(w, r)
				return
			}
			principal := PrincipalFrom(r.Context())
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			for _, p := range Permissions(r.Method, r.URL.Path) {
				if !a.Allowed(r.Context(), principal, host, p) {
					WriteProblem(w, r, fmt.Errorf("%w: %s may not %s %s %q (no ACL allows it)", ErrForbidden, principal, p.Operation, p.ResourceType, p.ResourceName))
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}
