package main

// Deploy checks for the hosts-and-containers platforms: docker compose (both
// layouts and the monitoring profile) and the systemd unit. The shared
// machinery (resolve, checkCluster, ...) is in deploy_test.go.

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/runnel/runnel/server"
)

// ---- docker compose --------------------------------------------------------

type composeService struct {
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Profiles    []string          `yaml:"profiles"`
	Volumes     []string          `yaml:"volumes"`
	StopSignal  string            `yaml:"stop_signal"`
	StopGrace   string            `yaml:"stop_grace_period"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Build struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
}

func TestDeployCompose(t *testing.T) {
	var file struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(readDeploy(t, "compose/docker-compose.yml"), &file); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	d := parseDockerfile(t)
	grace := 2 * server.DefaultConfig().ShutdownTimeout
	profiles := map[string][]resolved{}
	names := make([]string, 0, len(file.Services))
	for name := range file.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	scrape := map[string]bool{}
	for _, name := range names {
		svc := file.Services[name]
		where := "compose " + name
		if slices.Contains(svc.Profiles, "monitoring") {
			continue
		}
		if filepath.Join(deployDir, "compose", svc.Build.Context, svc.Build.Dockerfile) != filepath.Join(deployDir, "docker", "Dockerfile") {
			t.Errorf("%s: builds %s/%s, not deploy/docker/Dockerfile", where, svc.Build.Context, svc.Build.Dockerfile)
		}
		r := resolve(t, d.imageNode(t, where, svc.Environment, svc.Command))
		hostPort := map[int]int{} // container port -> host port
		r.published = map[int]bool{}
		for _, p := range svc.Ports {
			h, c, ok := strings.Cut(p, ":")
			if !ok {
				t.Errorf("%s: port %q is not host:container", where, p)
				continue
			}
			hostPort[portOrZero(c)] = portOrZero(h)
			r.published[portOrZero(c)] = true
		}
		// Clients on the host dial what the node advertises.
		for _, a := range []struct{ listen, adv string }{{r.http, r.httpAdv}, {r.kafka, r.kafkaAdv}} {
			if a.listen == "" {
				continue
			}
			want := fmt.Sprintf("localhost:%d", hostPort[portOf(t, where, a.listen)])
			if a.adv != want {
				t.Errorf("%s: advertises %s, host clients reach it at %s", where, a.adv, want)
			}
		}
		if host, _ := splitPort(t, where, r.raftAdv); host != name {
			t.Errorf("%s: advertises Raft at %s, peers know it as %s", where, r.raftAdv, name)
		}
		checkURLProbe(t, r, "healthcheck", svc.Healthcheck.Test, livezPath, readyzPath)
		if len(svc.Volumes) != 1 || !strings.HasSuffix(svc.Volumes[0], ":"+r.dataDir) {
			t.Errorf("%s: volumes %q, want one mounted on the data dir %s", where, svc.Volumes, r.dataDir)
		}
		if g, err := time.ParseDuration(svc.StopGrace); err != nil || g < grace || svc.StopSignal != "SIGTERM" {
			t.Errorf("%s: stop %s after %q, want SIGTERM and at least %v", where, svc.StopSignal, svc.StopGrace, grace)
		}
		scrape[fmt.Sprintf("%s:%d", name, portOf(t, where, r.http))] = true
		profile := "default"
		if len(svc.Profiles) > 0 {
			profile = strings.Join(svc.Profiles, ",")
		}
		profiles[profile] = append(profiles[profile], r)
	}
	for _, want := range []string{"default", "dedicated"} {
		nodes := profiles[want]
		if len(nodes) == 0 {
			t.Errorf("compose: no services in profile %q", want)
			continue
		}
		checkCluster(t, "compose profile "+want, nodes)
	}
	if n := len(profiles["dedicated"]); n != 6 {
		t.Errorf("compose: profile dedicated has %d nodes, want 3 controllers + 3 brokers", n)
	}
	checkComposeMonitoring(t, file.Services["grafana"], scrape)
}

// checkComposeMonitoring: Prometheus scrapes /metrics on every node's HTTP
// port and nothing else; Grafana mounts the dashboard.
func checkComposeMonitoring(t *testing.T, grafana composeService, want map[string]bool) {
	t.Helper()
	var prom struct {
		ScrapeConfigs []struct {
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(readDeploy(t, "compose/prometheus.yml"), &prom); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	got := map[string]bool{}
	for _, sc := range prom.ScrapeConfigs {
		if sc.MetricsPath != metricsPath {
			t.Errorf("prometheus.yml: metrics_path %q, runnel serves %s", sc.MetricsPath, metricsPath)
		}
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				got[target] = true
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("prometheus.yml scrapes %v, the compose nodes serve HTTP at %v", got, want)
	}
	if !slices.ContainsFunc(grafana.Volumes, func(v string) bool {
		return strings.HasPrefix(v, "../grafana/runnel-dashboard.json:")
	}) {
		t.Errorf("compose grafana: volumes %q do not mount deploy/grafana/runnel-dashboard.json", grafana.Volumes)
	}
}

// ---- systemd ---------------------------------------------------------------

// parseUnit reads a systemd unit: section -> key -> values in order.
func parseUnit(t *testing.T, raw []byte) map[string]map[string][]string {
	t.Helper()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("unit: bad line %q", line)
			}
			out[section][k] = append(out[section][k], v)
		}
	}
	return out
}

func parseEnvFile(t *testing.T, raw []byte) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("runnel.env: bad line %q", line)
		}
		env[k] = strings.Trim(v, `"`)
	}
	return env
}

func TestDeploySystemd(t *testing.T) {
	unit := parseUnit(t, readDeploy(t, "systemd/runnel.service"))
	svc := unit["Service"]
	one := func(key string) string {
		if v := svc[key]; len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	exec := strings.Fields(one("ExecStart"))
	if len(exec) < 2 || filepath.Base(exec[0]) != "runnel" {
		t.Fatalf("ExecStart %q does not run runnel", exec)
	}
	// Environment= first; EnvironmentFile= overrides it (systemd.exec(5)).
	env := map[string]string{}
	for _, e := range svc["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	if filepath.Base(one("EnvironmentFile")) != "runnel.env" {
		t.Errorf("EnvironmentFile=%s, want the runnel.env example's name", one("EnvironmentFile"))
	}
	for k, v := range parseEnvFile(t, readDeploy(t, "systemd/runnel.env")) {
		env[k] = v
	}
	r := resolve(t, deployNode{where: "systemd", args: exec[1:], env: env})
	checkListeners(t, r)
	checkVoter(t, r)
	if want := "/var/lib/" + one("StateDirectory"); one("StateDirectory") == "" || r.dataDir != want {
		t.Errorf("systemd: data dir %s, StateDirectory=%s", r.dataDir, one("StateDirectory"))
	}
	if !slices.Contains(strings.Fields(strings.Join(svc["ReadWritePaths"], " ")), r.dataDir) {
		t.Errorf("systemd: ReadWritePaths %q lacks the data dir %s", svc["ReadWritePaths"], r.dataDir)
	}
	nofile, _ := strconv.Atoi(one("LimitNOFILE"))
	maxFiles, _ := strconv.Atoi(r.maxOpenFiles)
	if nofile < 2*maxFiles {
		t.Errorf("systemd: LimitNOFILE=%s leaves no room above --max-open-files=%s", one("LimitNOFILE"), r.maxOpenFiles)
	}
	stop, err := time.ParseDuration(one("TimeoutStopSec") + "s")
	if err != nil || stop < 2*server.DefaultConfig().ShutdownTimeout {
		t.Errorf("systemd: TimeoutStopSec=%s, too short for a controlled shutdown", one("TimeoutStopSec"))
	}
	for key, want := range map[string]string{
		"Restart": "on-failure", "KillSignal": "SIGTERM", "NoNewPrivileges": "yes",
		"ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes", "CapabilityBoundingSet": "",
	} {
		if v, ok := svc[key]; !ok || v[len(v)-1] != want {
			t.Errorf("systemd: %s=%q, want %q", key, v, want)
		}
	}
}
