package main

// Checks deploy/ against the binary itself. Every deployment file is reduced
// to the `runnel serve` processes it starts (arguments and environment, with
// the Kubernetes start scripts run under /bin/sh and the Helm chart rendered
// by helm from the Go module proxy); each process is then resolved by the
// serve command's own flag parsing, and the files are checked against the
// result: flags and RUNNEL_* variables exist, listeners, exposed ports, probes
// and advertised addresses agree, the voter list names exactly the
// controllers. TestDeployImageServes builds the binary with the Dockerfile's
// own build line and checks that it serves the probe and metric paths the
// files use, and the metrics the Grafana dashboard plots.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server"
	"github.com/runnel/runnel/server/servertest"
)

const (
	deployDir   = "../../deploy"
	moduleRoot  = "../.."
	ciBuild     = "CGO_ENABLED=0 go build -trimpath -o /out/runnel ./cmd/runnel"
	imageBinary = "/usr/local/bin/runnel"
	helmCmd     = "helm.sh/helm/v3/cmd/helm@v3.22.0"

	livezPath   = "/livez"
	readyzPath  = "/readyz"
	metricsPath = "/metrics"
)

// pendingMetric reports the dashboard metrics a fresh node does not list
// yet: runnel_group_lag has series (and so a TYPE line) only once a group
// has committed. Every other runnel_* name the dashboard uses must be served.
func pendingMetric(name string) bool {
	return name == "runnel_group_lag"
}

// deployNode is one `runnel serve` process as a deployment file starts it.
type deployNode struct {
	where     string
	args      []string          // after the binary: "serve", flags
	env       map[string]string // the process environment
	published map[int]bool      // container ports the platform exposes; nil: not a container
}

// resolved is a node's effective settings, parsed by newServeCommand itself.
type resolved struct {
	deployNode
	id                          int32
	roles                       []server.Role
	ctrls                       []raftfsm.Server
	http, kafka, raft           string
	httpAdv, kafkaAdv, raftAdv  string // effective: the flag, else the listen address
	dataDir, rack, maxOpenFiles string
}

func (r resolved) has(role server.Role) bool { return slices.Contains(r.roles, role) }

// resolve runs the node's arguments and environment through the serve
// command's flag set and applyEnvAndFile, as `runnel serve` would.
func resolve(t *testing.T, n deployNode) resolved {
	t.Helper()
	fs := newServeCommand().Flags()
	if len(n.args) == 0 || n.args[0] != "serve" {
		t.Fatalf("%s: command %q is not `runnel serve`", n.where, n.args)
	}
	if err := fs.Parse(n.args[1:]); err != nil {
		t.Fatalf("%s: runnel %s: %v", n.where, strings.Join(n.args, " "), err)
	}
	if fs.NArg() > 0 {
		t.Errorf("%s: runnel serve takes no arguments, got %q", n.where, fs.Args())
	}
	known := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { known[envName(f.Name)] = true })
	for k := range n.env {
		if strings.HasPrefix(k, "RUNNEL_") && !known[k] {
			t.Errorf("%s: %s is not a `runnel serve` variable", n.where, k)
		}
	}
	for k := range known {
		if v, ok := n.env[k]; ok {
			t.Setenv(k, v)
		} else {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	if err := applyEnvAndFile(fs, ""); err != nil {
		t.Fatalf("%s: %v", n.where, err)
	}
	get := func(name string) string { return fs.Lookup(name).Value.String() }
	r := resolved{deployNode: n, http: get("http-addr"), kafka: get("kafka-addr"), raft: get("raft-addr"),
		dataDir: get("data-dir"), rack: get("rack"), maxOpenFiles: get("max-open-files")}
	var err error
	if r.id, err = fs.GetInt32("node-id"); err != nil {
		t.Fatalf("%s: node-id: %v", n.where, err)
	}
	if r.roles, err = server.ParseRoles(get("roles")); err != nil {
		t.Errorf("%s: --roles: %v", n.where, err)
	}
	if r.ctrls, err = server.ParseControllers(get("controllers")); err != nil {
		t.Errorf("%s: --controllers: %v", n.where, err)
	}
	if _, err := newLogger(get("log-level"), get("log-format")); err != nil {
		t.Errorf("%s: %v", n.where, err)
	}
	allowAnon, _ := fs.GetBool("allow-anonymous")
	mode := server.Config{HTTPAddr: r.http, HTTPSAddr: get("https-addr"), KafkaAddr: r.kafka, KafkaTLSAddr: get("kafka-tls-addr"),
		Auth: server.AuthConfig{Mode: get("auth"), AllowAnonymous: allowAnon}}
	if err := mode.CheckAuthMode(); err != nil {
		t.Errorf("%s: the node would not start: %v", n.where, err)
	}
	r.httpAdv = orDefault(get("http-advertised-addr"), r.http)
	r.kafkaAdv = orDefault(get("kafka-advertised-addr"), r.kafka)
	r.raftAdv = orDefault(get("raft-advertised-addr"), r.raft)
	if len(r.ctrls) == 0 && r.has(server.RoleController) {
		r.ctrls = []raftfsm.Server{{ID: r.id, Address: r.raftAdv}} // this node alone
	}
	return r
}

func orDefault(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

func splitPort(t *testing.T, where, addr string) (string, int) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: address %q: %v", where, addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%s: address %q: port: %v", where, addr, err)
	}
	return host, port
}

func portOf(t *testing.T, where, addr string) int {
	_, p := splitPort(t, where, addr)
	return p
}

// checkListeners: a node in a container or on a server host must listen on
// all interfaces, and a container must expose exactly what the node serves
// (Raft may stay unpublished: only peers on the container network dial it).
func checkListeners(t *testing.T, r resolved) {
	t.Helper()
	served := map[int]bool{}
	for _, a := range []struct{ name, addr string }{{"http", r.http}, {"kafka", r.kafka}, {"raft", r.raft}} {
		if a.addr == "" {
			continue
		}
		host, port := splitPort(t, r.where, a.addr)
		// A single node keeps its raft port on loopback (nobody else needs
		// it, and a reachable one needs inter-node authentication).
		single := a.name == "raft" && len(r.ctrls) <= 1
		if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) && !(single && ip != nil && ip.IsLoopback()) {
			t.Errorf("%s: %s listener %q is not on all interfaces", r.where, a.name, a.addr)
		}
		served[port] = true
	}
	if r.has(server.RoleBroker) && r.kafka == "" {
		t.Errorf("%s: a broker without a Kafka listener", r.where)
	}
	if r.published == nil {
		return
	}
	for p := range r.published {
		if !served[p] {
			t.Errorf("%s: exposes port %d, which runnel does not listen on (%s, %s, %s)", r.where, p, r.http, r.kafka, r.raft)
		}
	}
	for _, addr := range []string{r.http, r.kafka} {
		if addr != "" && !r.published[portOf(t, r.where, addr)] {
			t.Errorf("%s: listener %s is not exposed (%v)", r.where, addr, r.published)
		}
	}
}

// checkVoter: a controller's own entry in --controllers is the Raft address
// it advertises.
func checkVoter(t *testing.T, r resolved) {
	t.Helper()
	if !r.has(server.RoleController) {
		return
	}
	for _, c := range r.ctrls {
		if c.ID == r.id {
			if c.Address != r.raftAdv {
				t.Errorf("%s: --controllers has %d@%s, the node advertises Raft at %s", r.where, c.ID, c.Address, r.raftAdv)
			}
			if portOf(t, r.where, c.Address) != portOf(t, r.where, r.raft) {
				t.Errorf("%s: voter port of %s differs from --raft-addr %s", r.where, c.Address, r.raft)
			}
			return
		}
	}
	t.Errorf("%s: controller %d is not in --controllers %v", r.where, r.id, r.ctrls)
}

// checkCluster checks a complete set of nodes: unique ids, one voter list,
// naming exactly the controller-role nodes, and at least one broker.
func checkCluster(t *testing.T, name string, nodes []resolved) {
	t.Helper()
	if len(nodes) == 0 {
		t.Fatalf("%s: no nodes", name)
	}
	ids := map[int32]string{}
	var ctrlIDs []int32
	brokers := 0
	for _, n := range nodes {
		if prev, dup := ids[n.id]; dup {
			t.Errorf("%s: node id %d used by %s and %s", name, n.id, prev, n.where)
		}
		ids[n.id] = n.where
		if fmt.Sprint(n.ctrls) != fmt.Sprint(nodes[0].ctrls) {
			t.Errorf("%s: %s has --controllers %v, %s has %v", name, n.where, n.ctrls, nodes[0].where, nodes[0].ctrls)
		}
		if n.has(server.RoleController) {
			ctrlIDs = append(ctrlIDs, n.id)
		}
		if n.has(server.RoleBroker) {
			brokers++
		}
		checkListeners(t, n)
		checkVoter(t, n)
	}
	var listed []int32
	for _, c := range nodes[0].ctrls {
		listed = append(listed, c.ID)
	}
	slices.Sort(ctrlIDs)
	slices.Sort(listed)
	if !slices.Equal(ctrlIDs, listed) {
		t.Errorf("%s: controllers %v, but --controllers lists %v", name, ctrlIDs, listed)
	}
	if len(listed)%2 == 0 {
		t.Errorf("%s: %d voters: a Raft quorum wants an odd count", name, len(listed))
	}
	if brokers == 0 {
		t.Errorf("%s: no broker", name)
	}
}

// checkProbe: an HTTP probe hits a path runnel serves on its HTTP port.
func checkProbe(t *testing.T, r resolved, what, path string, port int, want ...string) {
	t.Helper()
	if !slices.Contains(want, path) {
		t.Errorf("%s: %s probes %q, want one of %v", r.where, what, path, want)
	}
	if port != portOf(t, r.where, r.http) {
		t.Errorf("%s: %s probes port %d, HTTP listens on %s", r.where, what, port, r.http)
	}
}

func checkURLProbe(t *testing.T, r resolved, what string, cmd []string, want ...string) {
	t.Helper()
	for _, w := range cmd {
		if u, err := url.Parse(w); err == nil && u.Scheme == "http" {
			checkProbe(t, r, what, u.Path, portOrZero(u.Port()), want...)
			return
		}
	}
	t.Errorf("%s: %s %q has no http:// URL", r.where, what, cmd)
}

func portOrZero(s string) int {
	p, _ := strconv.Atoi(s)
	return p
}

func readDeploy(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- Dockerfile ------------------------------------------------------------

type dockerfile struct {
	from        []string
	runs        []string
	env         map[string]string
	expose      map[int]bool
	volumes     []string
	user        string
	healthcheck []string
	entrypoint  []string
	cmd         []string
	copies      [][]string
	stopSignal  string
}

func parseDockerfile(t *testing.T) dockerfile {
	t.Helper()
	d := dockerfile{env: map[string]string{}, expose: map[int]bool{}}
	var lines []string
	cont := ""
	sc := bufio.NewScanner(bytes.NewReader(readDeploy(t, "docker/Dockerfile")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cont == "") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cont += s + " "
			continue
		}
		lines = append(lines, strings.Join(strings.Fields(cont+line), " "))
		cont = ""
	}
	jsonArray := func(s string) []string {
		var out []string
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			t.Fatalf("Dockerfile: %q is not a JSON array: %v", s, err)
		}
		return out
	}
	for _, line := range lines {
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			d.from = append(d.from, rest)
		case "RUN":
			d.runs = append(d.runs, rest)
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				d.env[k] = v
			}
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				d.expose[portOrZero(p)] = true
			}
		case "VOLUME":
			d.volumes = append(d.volumes, strings.Fields(rest)...)
		case "USER":
			d.user = rest
		case "HEALTHCHECK":
			_, c, _ := strings.Cut(rest, "CMD ")
			d.healthcheck = strings.Fields(c)
		case "ENTRYPOINT":
			d.entrypoint = jsonArray(rest)
		case "CMD":
			d.cmd = jsonArray(rest)
		case "COPY":
			d.copies = append(d.copies, strings.Fields(rest))
		case "STOPSIGNAL":
			d.stopSignal = rest
		}
	}
	return d
}

// imageNode is the node `docker run` starts: the image's ENV, ENTRYPOINT and CMD.
func (d dockerfile) imageNode(t *testing.T, where string, env map[string]string, cmd []string) deployNode {
	t.Helper()
	if !slices.Equal(d.entrypoint, []string{imageBinary}) {
		t.Errorf("Dockerfile: ENTRYPOINT %q, want [%s]", d.entrypoint, imageBinary)
	}
	all := map[string]string{}
	for k, v := range d.env {
		all[k] = v
	}
	for k, v := range env {
		all[k] = v
	}
	if cmd == nil {
		cmd = d.cmd
	}
	return deployNode{where: where, args: cmd, env: all}
}

func TestDeployDockerfile(t *testing.T) {
	d := parseDockerfile(t)
	var builds []string
	for _, r := range d.runs {
		if strings.Contains(r, "go build") {
			builds = append(builds, r)
		}
	}
	if len(builds) != 1 || builds[0] != ciBuild {
		t.Errorf("Dockerfile go build lines %q, want exactly [%q] (the build CI runs)", builds, ciBuild)
	}
	gomod, err := os.ReadFile(filepath.Join(moduleRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if len(d.from) < 2 || goVersion == nil || !strings.HasPrefix(d.from[0], "golang:"+string(goVersion[1])+" ") {
		t.Errorf("Dockerfile: build stage FROM %q, want golang:%s (go.mod)", d.from, goVersion[1])
	}
	if !slices.ContainsFunc(d.copies, func(c []string) bool {
		return slices.Equal(c, []string{"--from=build", "/out/runnel", imageBinary})
	}) {
		t.Errorf("Dockerfile: no COPY --from=build /out/runnel %s in %q", imageBinary, d.copies)
	}
	if d.user == "" || d.user == "root" || strings.HasPrefix(d.user, "0") {
		t.Errorf("Dockerfile: USER %q, want a non-root user", d.user)
	}
	if d.stopSignal != "SIGTERM" {
		t.Errorf("Dockerfile: STOPSIGNAL %q, want SIGTERM (controlled shutdown)", d.stopSignal)
	}
	r := resolve(t, d.imageNode(t, "Dockerfile", nil, nil))
	r.published = d.expose
	checkListeners(t, r)
	if !slices.Equal(d.volumes, []string{r.dataDir}) {
		t.Errorf("Dockerfile: VOLUME %q, data dir is %s", d.volumes, r.dataDir)
	}
	for _, p := range []string{r.http, r.kafka, r.raft} {
		if !d.expose[portOf(t, "Dockerfile", p)] {
			t.Errorf("Dockerfile: %s not in EXPOSE %v", p, d.expose)
		}
	}
	checkURLProbe(t, r, "HEALTHCHECK", d.healthcheck, livezPath)
	checkCluster(t, "docker run", []resolved{r})
}

// ---- the image's binary, live ---------------------------------------------

// untilTestDeadline is the context of a build or tool a test runs: it ends
// 30 s before the test binary's deadline (time to report), or after 10
// minutes without one. Compiling from scratch (helm, or runnel with the
// Dockerfile's CGO_ENABLED=0 -trimpath, which share no build cache entry
// with the tests' builds) takes minutes on a loaded 2-core machine: a
// fixed 10 minutes was exceeded by a CI run beside other work.
func untilTestDeadline(t *testing.T) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(10 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-30 * time.Second)
	}
	return context.WithDeadline(t.Context(), deadline)
}

// buildLikeCI runs line (VAR=value... go build ... -o <path> ...) from the
// module root with the -o path replaced by out.
func buildLikeCI(t *testing.T, line, out string) {
	t.Helper()
	fields := strings.Fields(line)
	var env []string
	for len(fields) > 0 && strings.Contains(fields[0], "=") {
		env, fields = append(env, fields[0]), fields[1:]
	}
	i := slices.Index(fields, "-o")
	if len(fields) < 2 || fields[0] != "go" || fields[1] != "build" || i < 0 || i+1 >= len(fields) {
		t.Fatalf("%q is not a go build -o line", line)
	}
	fields[i+1] = out
	ctx, cancel := untilTestDeadline(t) // a build from scratch (other flags, other cache keys)
	defer cancel()
	cmd := exec.CommandContext(ctx, fields[0], fields[1:]...)
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, b)
	}
}

// TestDeployImageServes builds runnel with the Dockerfile's build line, so CI
// compiles exactly what the image ships, starts it with the image's
// environment, and checks that it serves the paths the deploy files probe
// and scrape and every metric the Grafana dashboard plots.
func TestDeployImageServes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds runnel with the Dockerfile's go build line")
	}
	d := parseDockerfile(t)
	bin := filepath.Join(t.TempDir(), "runnel")
	buildLikeCI(t, ciBuild, bin)
	t.Setenv("RUNNEL_BINARY", bin)
	var env []string
	for k, v := range d.env {
		env = append(env, k+"="+v)
	}
	node := servertest.Start(t, servertest.Options{Env: env}) // ports and data dir: fresh ones
	for _, path := range []string{livezPath, readyzPath, metricsPath} {
		if code, body := httpDo(t, "GET", node.URL+path, ""); code != 200 {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
	httpDo(t, "POST", node.URL+"/v1/topics", `{"name":"deploy","partitions":1,"replication_factor":1}`)
	if code, body := httpDo(t, "POST", node.URL+"/v1/topics/deploy/records", `{"records":[{"value":{"a":1}}]}`); code != 200 {
		t.Fatalf("produce: %d %s", code, body)
	}
	httpDo(t, "GET", node.URL+"/v1/topics/deploy/partitions/0/records?offset=0", "")
	_, exposition := httpDo(t, "GET", node.URL+metricsPath, "")
	types := map[string]string{}
	for _, line := range strings.Split(exposition, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
		}
	}
	used := dashboardMetrics(t)
	for name := range used {
		base := regexp.MustCompile(`_(bucket|sum|count)$`).ReplaceAllString(name, "")
		if types[name] == "" && types[base] != "histogram" && !pendingMetric(name) {
			t.Errorf("dashboard plots %s, which runnel does not export", name)
		}
	}
	for _, name := range []string{"runnel_under_replicated_partitions", "runnel_offline_partitions", "runnel_group_lag"} {
		if !used[name] {
			t.Errorf("pending metric %s is not on the dashboard", name)
		}
	}
}

// dashboardMetrics returns every runnel_* name in the Grafana dashboard.
func dashboardMetrics(t *testing.T) map[string]bool {
	t.Helper()
	var dash any
	if err := json.Unmarshal(readDeploy(t, "grafana/runnel-dashboard.json"), &dash); err != nil {
		t.Fatalf("runnel-dashboard.json: %v", err)
	}
	names := map[string]bool{}
	re := regexp.MustCompile(`\brunnel_[a-z0-9_]+`)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case string:
			for _, m := range re.FindAllString(v, -1) {
				names[m] = true
			}
		}
	}
	walk(dash)
	if len(names) == 0 {
		t.Fatal("runnel-dashboard.json uses no runnel metric")
	}
	return names
}

func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
