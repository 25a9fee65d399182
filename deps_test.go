package runnel_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The front doors, the stores, the inter-node port and the UI import no
// other project package (the root package with the embedded spec aside)
// but the leaf internal/warnlimit; the metadata state machine (raftfsm) is
// a leaf too, and the raft node that runs it (raftfsm/quorum) imports only
// it and internode; the coordinators under server/ (server/groups) reach the
// broker only through their own interfaces and import the leaves alone,
// as does the data plane (server/broker) and the security surface
// (server/access, over the leaf authorizer server/auth); the doors'
// adapters (server/httpdoor, server/kafkadoor), the coordinators' backends
// (server/coordinators) and the shared metadata changes (server/admin)
// build on those packages, never on server; only server composes them
// (docs/architecture.md).
func TestPackageDependencyDirection(t *testing.T) {
	const mod = "github.com/runnel/runnel"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// Each checked package and the project packages it may import (its own
	// subpackages always).
	allowed := map[string][]string{
		"api": nil, "segments": nil, "web": nil,
		"api/rest":   {"api"}, // the HTTP handler over the api contract
		"kafkaproto": {"internal/warnlimit"}, "internode": {"internal/warnlimit"},
		"internal/warnlimit": nil,                      // rate-limited WARN lines: a leaf
		"raftfsm":            nil,                      // the metadata state machine: a leaf
		"raftfsm/quorum":     {"raftfsm", "internode"}, // the raft node running it on the inter-node port
		"server/groups":      {"api", "kafkaproto", "raftfsm", "internode"},
		"server/broker":      {"api", "kafkaproto", "raftfsm", "internode", "segments", "internal/warnlimit"}, // the data plane: never server
		"server/access":      {"api", "raftfsm", "server/auth"},                                               // the security surface: users, tokens, sessions, ACLs over the one authorizer; never server
		"server/auth":        nil,                                                                             // the one authorizer: a leaf
		"server/quota":       {"api", "raftfsm"},                                                              // the quota meters, the node's table of them and the HTTP door's enforcement (quota.Node)
		"server/connrate":    nil,                                                                             // the connection creation rate limiter: a leaf
		"server/admin":       {"raftfsm", "server/broker", "server/groups"},                                   // both doors' metadata changes and elections; never server
		"server/metrics":     {"api", "raftfsm"},                                                              // the Prometheus collectors and the UI's series
		"server/tlsreload":   nil,                                                                             // the client-facing certificate, reloaded: a leaf
		// The coordinators on a broker (their backends): never server.
		"server/coordinators": {"api", "kafkaproto", "raftfsm", "segments", "server/admin", "server/broker",
			"server/groups", "server/metrics", "server/txn"},
		// The Kafka door's adapter: never server.
		"server/kafkadoor": {"kafkaproto", "raftfsm", "segments", "server/access", "server/admin",
			"server/auth", "server/broker", "server/groups", "server/metrics", "server/quota", "server/txn"},
		// The HTTP door's adapter: never server (which wires it).
		"server/httpdoor": {"api", "kafkaproto", "raftfsm", "segments", "server/access", "server/admin",
			"server/auth", "server/broker", "server/groups", "server/metrics", "server/quota"},
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod+"/")
		top := checkedRoot(pkg, allowed)
		if top == "" {
			continue
		}
		checked++
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			rel := strings.TrimPrefix(imp, mod+"/")
			if checkedRoot(rel, map[string][]string{top: nil}) == top {
				continue
			}
			ok := false
			for _, a := range allowed[top] {
				ok = ok || rel == a || strings.HasPrefix(rel, a+"/")
			}
			if !ok {
				t.Errorf("%s imports %s: %s may import only %v of the project", fields[0], imp, top, allowed[top])
			}
		}
	}
	if checked < len(allowed) {
		t.Fatalf("checked %d packages, expected at least %d", checked, len(allowed))
	}
}

// checkedRoot is the key of roots that pkg is or is under ("" for none),
// the longest first.
func checkedRoot(pkg string, roots map[string][]string) string {
	best := ""
	for r := range roots {
		if (pkg == r || strings.HasPrefix(pkg, r+"/")) && len(r) > len(best) {
			best = r
		}
	}
	return best
}
