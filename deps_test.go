package runnel_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The front doors, the stores, the inter-node port and the UI import no
// other project package (the root package with the embedded spec aside)
// but the leaves internal/warnlimit and (kafkaproto) internal/waitlog
// (segments also the leaf codec
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
//
// Every package has a rule: its own, or (outside server/) its parent's,
// as kafkaproto's subpackages share kafkaproto's. An allowed package X
// admits X's subpackages too, but not one with a rule of its own: that
// one is named (raftfsm admits raftfsm's model, not raftfsm/quorum). So
// the raft node and the HTTP handler are wired by the composition root
// alone (wiredOnlyBy); a package below it reaches them through its own
// narrow interfaces (admin.Metadata, broker.Metadata, ...). Test files
// are not checked: a test may build what it exercises from anything.
func TestPackageDependencyDirection(t *testing.T) {
	const mod = "github.com/runnel/runnel"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// Each package and the project packages it may import (its own
	// subpackages always). nil: a leaf.
	allowed := map[string][]string{
		".":   nil, // the module root: the embedded openapi.yaml
		"api": nil, "web": nil,
		"api/client":         nil,                   // the generated HTTP client
		"api/rest":           {"api", "."},          // the HTTP handler over the api contract and the embedded spec it validates against
		"recordbatch":        nil,                   // the one RecordBatch codec: a leaf
		"segments":           {"recordbatch"},       // one partition's log, over the codec
		"segments/vfs":       nil,                   // the filesystem the log writes through
		"segments/statefile": {"internal/textline"}, // the log's state file codec, over the shared line splitter
		"kafkaproto":         {"internal/warnlimit", "internal/waitlog"}, "internode": {"internal/warnlimit"},
		"kafkaproto/kapi":    nil,                      // the Kafka listener's contract (Broker, sentinels, handler entry): a leaf
		"kafkaproto/admin":   {"kafkaproto/kapi"},      // the Kafka admin APIs, over the listener's contract
		"kafkaproto/groups":  {"kafkaproto/kapi"},      // the Kafka consumer group APIs, likewise
		"kafkaproto/txn":     {"kafkaproto/kapi"},      // the Kafka transaction APIs, likewise
		"internal/warnlimit": nil,                      // rate-limited WARN lines: a leaf
		"internal/waitlog":   nil,                      // what a slow stop waits for, grouped for its log: a leaf
		"internal/syncbuf":   nil,                      // a byte buffer for concurrent writers, the logs tests watch: a leaf
		"internal/testport":  nil,                      // free loopback ports for tests: a leaf
		"internal/alloctest": nil,                      // what code allocates, for the tests bounding decoders: a leaf
		"internal/disktest":  nil,                      // a real full disk for tests (tmpfs, ballast): a leaf
		"internal/textline":  nil,                      // the line splitter of the small text file formats (statefile, hwcheckpoint): a leaf
		"raftfsm":            nil,                      // the metadata state machine: a leaf
		"raftfsm/quorum":     {"raftfsm", "internode"}, // the raft node running it on the inter-node port
		"server/groups":      {"api", "kafkaproto", "raftfsm"},
		"server/txn":         {"kafkaproto"}, // the transaction coordinator
		"server/broker": {"api", "kafkaproto", "raftfsm", "segments", "segments/vfs", "recordbatch", "internal/warnlimit",
			"server/broker/producers", "server/broker/producerlog", "server/broker/topicconfig", "server/broker/kafkaconn", "server/broker/readbuf",
			"server/broker/storage", "server/broker/dirdelete", "server/broker/workpool", "server/broker/replfetch",
			"server/broker/hwcheckpoint"}, // the data plane: never server

		"server/broker/hwcheckpoint": {"internal/textline"}, // the high-watermark checkpoint file's codec, over the shared line splitter

		"server/broker/producers":   {"recordbatch"},                                                            // the producer table and idempotency keys
		"server/broker/producerlog": {"kafkaproto", "recordbatch", "segments", "server/broker/producers"},       // their rebuild from a partition's log
		"server/broker/storage":     {"segments"},                                                               // the disk reserve, storage errors and the recovery of failed logs
		"server/broker/topicconfig": {"kafkaproto", "segments", "recordbatch"},                                  // the topic config table: a leaf of the data plane
		"server/broker/dirdelete":   {"server/broker/workpool"},                                                 // deletes directories off the broker's lock, on a workpool
		"server/broker/kafkaconn":   nil,                                                                        // the Kafka client to another broker: a leaf
		"server/broker/workpool":    nil,                                                                        // bounded goroutines for queued tasks (the fetchers' applies): a leaf
		"server/broker/readbuf":     {"segments"},                                                               // the HTTP reads' buffers
		"server/broker/replfetch":   nil,                                                                        // a follower fetcher's changed partitions and fetch session: a leaf
		"server/access":             {"api", "raftfsm", "server/auth"},                                          // the security surface: users, tokens, sessions, ACLs over the one authorizer; never server
		"server/auth":               nil,                                                                        // the one authorizer: a leaf
		"server/quota":              {"api", "raftfsm"},                                                         // the quota meters, the node's table of them and the HTTP door's enforcement (quota.Node)
		"server/connrate":           nil,                                                                        // the connection creation rate limiter: a leaf
		"server/admin":              {"raftfsm", "server/broker", "server/broker/topicconfig", "server/groups"}, // both doors' metadata changes and elections; never server
		"server/metrics":            {"api", "raftfsm"},                                                         // the Prometheus collectors and the UI's series
		"server/tlsreload":          nil,                                                                        // the client-facing certificate, reloaded: a leaf
		"server/servertest":         {"internal/testport", "internal/syncbuf"},                                  // the harness running real runnel processes
		// The coordinators on a broker (their backends): never server.
		"server/coordinators": {"api", "kafkaproto", "raftfsm", "recordbatch", "segments", "server/admin", "server/broker",
			"server/broker/kafkaconn", "server/groups", "server/metrics", "server/txn"},
		// The Kafka door's adapter: never server.
		"server/kafkadoor": {"kafkaproto", "raftfsm", "recordbatch", "segments", "server/access", "server/admin",
			"server/auth", "server/broker", "server/broker/topicconfig", "server/groups", "server/metrics", "server/quota", "server/txn"},
		// The HTTP door's adapter: never server (which wires it).
		"server/httpdoor": {"api", "kafkaproto", "raftfsm", "recordbatch", "segments", "server/access", "server/admin",
			"server/auth", "server/broker", "server/broker/kafkaconn", "server/broker/producers", "server/broker/topicconfig",
			"server/groups", "server/metrics", "server/quota"},
		// The composition root: config, lifecycle, wiring; its subpackages
		// always, and what it wires them with.
		"server": {"api", "api/rest", "internal/warnlimit", "internal/waitlog", "internode", "kafkaproto", "raftfsm", "raftfsm/quorum",
			"recordbatch", "segments", "segments/vfs", "web"},
		// The binary: its commands, and the configuration types its flags
		// fill (rest.Limits, raftfsm.Limits, internode's certificates).
		"cmd/runnel":         {"api", "api/client", "api/rest", "internode", "raftfsm", "server"},
		"scripts/chaostable": {"server/servertest"}, // rewrites README's chaos table from the scenarios' results (servertest.ChaosResult)
	}
	// The raft node and the HTTP handler are wired, not used: only these
	// packages import them.
	wiredOnlyBy := map[string][]string{
		"raftfsm/quorum": {"server"},
		"api/rest":       {"server", "cmd/runnel"},
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := relPkg(mod, fields[0])
		top := checkedRoot(pkg, allowed)
		if top == "" || top == "server" && pkg != "server" {
			t.Errorf("%s has no rule: give it one in this test and docs/architecture.md", fields[0])
			continue
		}
		checked++
		for _, imp := range fields[1:] {
			if imp != mod && !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			rel := relPkg(mod, imp)
			if checkedRoot(rel, map[string][]string{top: nil}) == top {
				continue
			}
			if !mayImport(rel, allowed[top], allowed) {
				t.Errorf("%s imports %s: %s may import only %v of the project", fields[0], imp, top, allowed[top])
			}
			if by, ok := wiredOnlyBy[rel]; ok && !slices.Contains(by, top) {
				t.Errorf("%s imports %s, which only %v wire", fields[0], imp, by)
			}
		}
	}
	if checked < len(allowed) {
		t.Fatalf("checked %d packages, expected at least %d", checked, len(allowed))
	}
}

// relPkg is path relative to the module ("." for the module root).
func relPkg(mod, path string) string {
	if path == mod {
		return "."
	}
	return strings.TrimPrefix(path, mod+"/")
}

// mayImport reports whether rel is one of list or under one, unless the
// package rel is or is under has a rule of its own that is not in list:
// a subpackage with its own rule is admitted only by name.
func mayImport(rel string, list []string, rules map[string][]string) bool {
	owner := checkedRoot(rel, rules)
	for _, a := range list {
		if rel == a || strings.HasPrefix(rel, a+"/") && (owner == "" || len(owner) <= len(a)) {
			return true
		}
	}
	return false
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
		"raftfsm/snapshot.go":                        "the metadata snapshot file",
		"segments/statefile/statefile.go":            "the log.state file (version 4)",
		"segments/txn.go":                            "the .txnindex file and the .index / .timeindex trailers (appendFileCRC, checkFileCRC)",
		"server/broker/hwmcheckpoint.go":             "the previous release's per-partition high-watermark file",
		"server/broker/hwcheckpoint/hwcheckpoint.go": "the high-watermark checkpoint file",
		"server/broker/producers/table.go":           "the producer table's record fingerprint",
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
