package runnel_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The front doors, the stores, the inter-node port and the UI import no
// other project package (the root package with the embedded spec aside)
// but the leaf internal/warnlimit (segments also the leaf codec
// recordbatch, which it stores batches through); the metadata state
// machine (raftfsm) is a leaf too, and the raft node that runs it (raftfsm/quorum) imports only
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
		"api": nil, "web": nil,
		"recordbatch": nil,             // the one RecordBatch codec: a leaf
		"segments":    {"recordbatch"}, // one partition's log, over the codec
		"api/rest":    {"api"},         // the HTTP handler over the api contract
		"kafkaproto":  {"internal/warnlimit"}, "internode": {"internal/warnlimit"},
		"internal/warnlimit":        nil,                      // rate-limited WARN lines: a leaf
		"raftfsm":                   nil,                      // the metadata state machine: a leaf
		"raftfsm/quorum":            {"raftfsm", "internode"}, // the raft node running it on the inter-node port
		"server/groups":             {"api", "kafkaproto", "raftfsm", "internode"},
		"server/broker":             {"api", "kafkaproto", "raftfsm", "internode", "segments", "recordbatch", "internal/warnlimit"}, // the data plane: never server
		"server/broker/topicconfig": {"kafkaproto", "segments", "recordbatch"},                                                      // the topic config table: a leaf of the data plane
		"server/access":             {"api", "raftfsm", "server/auth"},                                                              // the security surface: users, tokens, sessions, ACLs over the one authorizer; never server
		"server/auth":               nil,                                                                                            // the one authorizer: a leaf
		"server/quota":              {"api", "raftfsm"},                                                                             // the quota meters, the node's table of them and the HTTP door's enforcement (quota.Node)
		"server/connrate":           nil,                                                                                            // the connection creation rate limiter: a leaf
		"server/admin":              {"raftfsm", "server/broker", "server/groups"},                                                  // both doors' metadata changes and elections; never server
		"server/metrics":            {"api", "raftfsm"},                                                                             // the Prometheus collectors and the UI's series
		"server/tlsreload":          nil,                                                                                            // the client-facing certificate, reloaded: a leaf
		// The coordinators on a broker (their backends): never server.
		"server/coordinators": {"api", "kafkaproto", "raftfsm", "recordbatch", "segments", "server/admin", "server/broker",
			"server/groups", "server/metrics", "server/txn"},
		// The Kafka door's adapter: never server.
		"server/kafkadoor": {"kafkaproto", "raftfsm", "recordbatch", "segments", "server/access", "server/admin",
			"server/auth", "server/broker", "server/groups", "server/metrics", "server/quota", "server/txn"},
		// The HTTP door's adapter: never server (which wires it).
		"server/httpdoor": {"api", "kafkaproto", "raftfsm", "recordbatch", "segments", "server/access", "server/admin",
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

// TestOneRecordBatchCodec: package recordbatch is the one implementation of
// Kafka's RecordBatch v2 in runnel's code (tests aside, which build hostile
// batches by hand): no other package computes a CRC-32C but over its own
// file formats (listed below), encodes a batch with kmsg.RecordBatch, or
// declares the header's length or field offsets.
func TestOneRecordBatchCodec(t *testing.T) {
	// Files with a CRC-32C of a format of their own, not a batch's.
	ownCRC := map[string]string{
		"raftfsm/snapshot.go":              "the metadata snapshot file",
		"segments/txn.go":                  "the .txnindex file",
		"server/broker/replication.go":     "the high-watermark checkpoint",
		"server/broker/producers/table.go": "the producer table's record fingerprint",
	}
	// Integer constants that are the header's layout: its length and the
	// offsets of the CRC and of the attributes it starts from.
	layout := map[string]bool{"61": true, "17": true, "21": true}
	out, err := exec.Command("go", "list", "-f", `{{.Dir}} {{join .GoFiles " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		dir, _ := filepath.Rel(root, fields[0])
		if dir == "recordbatch" {
			continue
		}
		for _, name := range fields[1:] {
			rel := filepath.ToSlash(filepath.Join(dir, name))
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(fields[0], name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files++
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					pkg, _ := n.X.(*ast.Ident)
					switch {
					case pkg == nil:
					case pkg.Name == "crc32" && n.Sel.Name == "Castagnoli" && ownCRC[rel] == "":
						t.Errorf("%s uses CRC-32C: batch CRCs are recordbatch's (SetCRC); a format of its own goes in this test's list", rel)
					case pkg.Name == "kmsg" && n.Sel.Name == "RecordBatch":
						t.Errorf("%s encodes or decodes kmsg.RecordBatch: use recordbatch", rel)
					}
				case *ast.ValueSpec:
					for i, v := range n.Values {
						lit, ok := v.(*ast.BasicLit)
						name := strings.ToLower(n.Names[i].Name)
						if ok && lit.Kind == token.INT && layout[lit.Value] && strings.Contains(name, "batch") {
							t.Errorf("%s declares %s = %s, a RecordBatch header constant: use recordbatch's", rel, n.Names[i].Name, lit.Value)
						}
					}
				}
				return true
			})
		}
	}
	if files < 100 {
		t.Fatalf("checked %d files, expected the whole module", files)
	}
}
