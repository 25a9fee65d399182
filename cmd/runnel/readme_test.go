package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// The READMEs' commands are run as a newcomer would paste them.

// readmeBlock is one ```sh block of a markdown file.
type readmeBlock struct {
	line int    // where it starts, 1-based
	skip string // the reason of a "<!-- readme test: not run (...) -->" marker right before it
	text string
}

var (
	shBlockRE = regexp.MustCompile("(?s)```sh\n(.*?)```")
	skipRE    = regexp.MustCompile(`<!-- readme test: not run \((.+)\) -->\s*$`)
)

func readmeBlocks(t *testing.T, path string) []readmeBlock {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeBlock
	for _, m := range shBlockRE.FindAllSubmatchIndex(raw, -1) {
		b := readmeBlock{line: 1 + strings.Count(string(raw[:m[0]]), "\n"), text: string(raw[m[2]:m[3]])}
		if sm := skipRE.FindSubmatch(raw[:m[0]]); sm != nil {
			b.skip = string(sm[1])
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no sh blocks", path)
	}
	return out
}

// readmeShell runs script with bash -euo pipefail in dir. Its preamble makes
// curl fail on an HTTP error (a problem response) and runs make in the
// repository root, so a block runs as written from any directory.
func readmeShell(t *testing.T, dir string, env []string, script string) (string, error) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	preamble := fmt.Sprintf(`set -euo pipefail
curl() { command curl --fail-with-body --max-time 60 "$@"; }
make() { command make -C %q "$@"; }
`, root)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", preamble+script)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err == nil && strings.Contains(string(out), "urn:runnel:problem:") {
		err = fmt.Errorf("a problem response in the output")
	}
	return string(out), err
}

// sandboxEnv is the environment for README commands: the server and
// ports of the test node, and a GOPATH of its own so `make install` puts
// runnel where the README's PATH line looks, without touching the user's.
func sandboxEnv(t *testing.T, serverURL string) []string {
	t.Helper()
	goenv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	modcache, gocache := goenv("GOMODCACHE"), goenv("GOCACHE")
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GOPATH", "GOBIN", "GOMODCACHE", "GOCACHE", "RUNNEL_SERVER":
		default:
			env = append(env, kv)
		}
	}
	return append(env, "GOPATH="+filepath.Join(t.TempDir(), "gopath"), "GOMODCACHE="+modcache, "GOCACHE="+gocache,
		"RUNNEL_SERVER="+serverURL)
}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			servertest.MissingTool(t, tool+" not installed (the README's commands use it)")
		}
	}
}

// Every sh block of README.md, in order, against a fresh node (ports
// replaced): the install line, the curl quickstart, consumer groups, kcat and
// the command line. Blocks marked "not run" say why; any non-zero exit or
// problem response fails.
func TestReadmeShellBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and installs runnel, runs the README against a node")
	}
	needTools(t, "bash", "curl", "kcat", "make", "sed", "seq")
	node := servertest.Start(t, servertest.Options{})
	env := sandboxEnv(t, node.URL)
	// The security walk-through starts a node of its own on 8090 (Kafka
	// 9095, Raft 9096): free ports here.
	ports := strings.NewReplacer("localhost:8080", node.HTTPAddr, "localhost:9092", node.KafkaAddr,
		"localhost:8090", servertest.FreeAddr(t), "localhost:9095", servertest.FreeAddr(t), "localhost:9096", servertest.FreeAddr(t))
	// One shell for all blocks, as one terminal: the install block's PATH
	// line holds for the blocks after it.
	var script strings.Builder
	ran := 0
	for _, b := range readmeBlocks(t, "../../README.md") {
		if b.skip != "" {
			t.Logf("README.md:%d not run: %s", b.line, b.skip)
			continue
		}
		fmt.Fprintf(&script, "echo '>>> README.md:%d'\n%s", b.line, ports.Replace(b.text))
		ran++
	}
	if ran < 5 {
		t.Fatalf("%d README blocks to run; the install, quickstart, groups, Kafka and CLI blocks at least", ran)
	}
	dir := t.TempDir()
	out, err := readmeShell(t, dir, env, script.String())
	if err != nil {
		// The security walk-through's node logs to a file of its own: a
		// node that never became ready says why there (CI saw the wait
		// for it run out the shell's 5 minutes once, its log lost).
		if log, rerr := os.ReadFile(filepath.Join(dir, "secure.log")); rerr == nil {
			out += "\n--- secure.log\n" + string(log)
		}
		block := "?"
		if i := strings.LastIndex(out, ">>> README.md:"); i >= 0 {
			block, _, _ = strings.Cut(out[i+4:], "\n")
		}
		t.Fatalf("%s: %v\n--- output\n%s", block, err, out)
	}
	if !strings.Contains(out, ">>> README.md:") || strings.Count(out, ">>> README.md:") != ran {
		t.Fatalf("not every block ran:\n%s", out)
	}
}

// The curl lines of deploy/README.md (the rest needs Docker, Kubernetes or
// root) against a local three-node cluster standing in for the compose and
// Kubernetes nodes.
func TestDeployReadmeCurls(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	needTools(t, "bash", "curl", "kcat")
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3})
	n1, n2, n3 := c.Node(1), c.Node(2), c.Node(3)
	ports := strings.NewReplacer(
		"localhost:8080", n1.HTTPAddr, "localhost:18080", n1.HTTPAddr, "localhost:28080", n2.HTTPAddr,
		"localhost:38080", n3.HTTPAddr, "localhost:18280", n1.HTTPAddr, "localhost:19092", n1.KafkaAddr)
	env := sandboxEnv(t, n1.URL)
	ran := 0
	for _, b := range readmeBlocks(t, "../../deploy/README.md") {
		var lines []string
		for line := range strings.Lines(b.text) {
			if strings.HasPrefix(line, "curl ") || strings.HasPrefix(line, "kcat ") {
				lines = append(lines, ports.Replace(line))
			}
		}
		if len(lines) == 0 {
			continue
		}
		script := strings.Join(lines, "")
		out, err := readmeShell(t, t.TempDir(), env, script)
		if err != nil {
			t.Fatalf("deploy/README.md:%d: %v\n--- lines\n%s--- output\n%s", b.line, err, script, out)
		}
		ran += len(lines)
	}
	if ran < 5 {
		t.Fatalf("ran %d curl/kcat lines of deploy/README.md", ran)
	}
}
