package main

// The Kubernetes half of the deploy checks (deploy_test.go has the rest): the
// plain manifests and the Helm chart, rendered in several configurations by
// helm from the Go module proxy. Every StatefulSet pod is simulated: its
// environment expanded as the kubelet would, its start script run under
// /bin/sh up to the exec of runnel, and the result resolved by `runnel serve`'s
// own flag parsing.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/runnel/runnel/server"
)

// ---- Kubernetes: plain manifests and the Helm chart ------------------------

type kubeMeta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type kubeProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type kubeContainer struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe  *kubeProbe `yaml:"livenessProbe"`
	ReadinessProbe *kubeProbe `yaml:"readinessProbe"`
	StartupProbe   *kubeProbe `yaml:"startupProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type kubeStatefulSet struct {
	ServiceName string `yaml:"serviceName"`
	Replicas    int    `yaml:"replicas"`
	Template    struct {
		Metadata kubeMeta    `yaml:"metadata"`
		Spec     kubePodSpec `yaml:"spec"`
	} `yaml:"template"`
	VolumeClaimTemplates []struct {
		Metadata kubeMeta `yaml:"metadata"`
	} `yaml:"volumeClaimTemplates"`
}

type kubePodSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	Affinity                      struct {
		PodAntiAffinity map[string][]map[string]any `yaml:"podAntiAffinity"`
	} `yaml:"affinity"`
	InitContainers []kubeContainer `yaml:"initContainers"`
	Containers     []kubeContainer `yaml:"containers"`
}

type kubeService struct {
	Type                     string            `yaml:"type"`
	ClusterIP                string            `yaml:"clusterIP"`
	PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
	Selector                 map[string]string `yaml:"selector"`
	Ports                    []struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		TargetPort any    `yaml:"targetPort"`
		NodePort   int    `yaml:"nodePort"`
	} `yaml:"ports"`
}

type kubeObjects struct {
	sets     map[string]kubeStatefulSet
	services map[string]kubeService
	meta     map[string]kubeMeta // "Kind/name"
	pdbs     []map[string]string // selectors
	monitors []kubeMonitor
}

type kubeMonitor struct {
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Endpoints []struct {
		Port string `yaml:"port"`
		Path string `yaml:"path"`
	} `yaml:"endpoints"`
}

func parseKube(t *testing.T, where string, raw []byte) kubeObjects {
	t.Helper()
	objs := kubeObjects{sets: map[string]kubeStatefulSet{}, services: map[string]kubeService{}, meta: map[string]kubeMeta{}}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var doc struct {
			Kind     string    `yaml:"kind"`
			Metadata kubeMeta  `yaml:"metadata"`
			Spec     yaml.Node `yaml:"spec"`
		}
		if err := dec.Decode(&doc); err != nil {
			if err.Error() == "EOF" {
				return objs
			}
			t.Fatalf("%s: %v", where, err)
		}
		objs.meta[doc.Kind+"/"+doc.Metadata.Name] = doc.Metadata
		var err error
		switch doc.Kind {
		case "StatefulSet":
			var s kubeStatefulSet
			err = doc.Spec.Decode(&s)
			objs.sets[doc.Metadata.Name] = s
		case "Service":
			var s kubeService
			err = doc.Spec.Decode(&s)
			objs.services[doc.Metadata.Name] = s
		case "PodDisruptionBudget":
			var p struct {
				Selector struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"selector"`
			}
			err = doc.Spec.Decode(&p)
			objs.pdbs = append(objs.pdbs, p.Selector.MatchLabels)
		case "ServiceMonitor":
			var m kubeMonitor
			err = doc.Spec.Decode(&m)
			objs.monitors = append(objs.monitors, m)
		}
		if err != nil {
			t.Fatalf("%s: %s %s: %v", where, doc.Kind, doc.Metadata.Name, err)
		}
	}
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// Downward API values the simulated pods get.
const (
	simHostIP = "192.0.2.7"
	simZone   = "zone-a"
)

// podSim is what a simulated pod runs with: stub binaries (runnel prints its
// arguments and environment, kubectl answers the node's zone) and a temporary
// directory for each emptyDir its init containers share.
type podSim struct {
	bin   string
	paths map[string]string // mount path -> temp dir
}

func newPodSim(t *testing.T, initContainers []kubeContainer) podSim {
	t.Helper()
	dir := t.TempDir()
	sim := podSim{bin: filepath.Join(dir, "bin"), paths: map[string]string{}}
	stubs := map[string]string{
		"runnel":  "#!/bin/sh\nfor a in \"$@\"; do printf 'ARG %s\\n' \"$a\"; done\nenv\n",
		"kubectl": "#!/bin/sh\ncase \"$*\" in *'topology\\.kubernetes\\.io/zone'*) printf " + simZone + " ;; *) exit 1 ;; esac\n",
	}
	if err := os.Mkdir(sim.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range stubs {
		if err := os.WriteFile(filepath.Join(sim.bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range initContainers {
		for _, m := range c.VolumeMounts {
			sim.paths[m.MountPath] = filepath.Join(dir, m.Name)
			if err := os.MkdirAll(sim.paths[m.MountPath], 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return sim
}

// podEnv expands a container's environment as the kubelet would: $(VAR)
// references to earlier variables and downward API fields.
func podEnv(t *testing.T, where, pod string, c kubeContainer) map[string]string {
	t.Helper()
	env := map[string]string{}
	expand := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range c.Env {
		v := expand.ReplaceAllStringFunc(e.Value, func(m string) string {
			if x, ok := env[m[2:len(m)-1]]; ok {
				return x
			}
			return m
		})
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			switch fp := e.ValueFrom.FieldRef.FieldPath; fp {
			case "metadata.name":
				v = pod
			case "spec.nodeName":
				v = "node-a"
			case "status.hostIP":
				v = simHostIP
			case "metadata.labels['topology.kubernetes.io/zone']":
				v = simZone
			default:
				t.Fatalf("%s: env %s from unexpected field %s", where, e.Name, fp)
			}
		}
		env[e.Name] = v
	}
	return env
}

// run runs a container's /bin/sh -c script in the simulation.
func (s podSim) run(t *testing.T, where, script string, env map[string]string) string {
	t.Helper()
	script = strings.ReplaceAll(script, imageBinary, filepath.Join(s.bin, "runnel"))
	for from, to := range s.paths {
		script = strings.ReplaceAll(script, from, to)
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=" + s.bin + ":/usr/bin:/bin"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: script: %v\n%s\n%s", where, err, script, out)
	}
	return string(out)
}

func isShell(c kubeContainer) bool {
	return slices.Equal(c.Command, []string{"/bin/sh", "-c"}) && len(c.Args) == 1
}

// kubePod runs pod `pod` as far as the exec of runnel: init containers first,
// then the runnel container's start script with the binary stubbed out.
func kubePod(t *testing.T, where, pod string, spec kubePodSpec) deployNode {
	t.Helper()
	sim := newPodSim(t, spec.InitContainers)
	for _, ic := range spec.InitContainers {
		if !isShell(ic) {
			t.Fatalf("%s: init container %s is not a /bin/sh -c script", where, ic.Name)
		}
		sim.run(t, where+" init "+ic.Name, ic.Args[0], podEnv(t, where, pod, ic))
	}
	c := spec.Containers[0]
	env := podEnv(t, where, pod, c)
	if !isShell(c) {
		argv := append(slices.Clone(c.Command), c.Args...)
		if len(argv) == 0 || argv[0] != imageBinary {
			t.Fatalf("%s: command %q does not run %s", where, argv, imageBinary)
		}
		return deployNode{where: where, args: argv[1:], env: env}
	}
	if !strings.Contains(c.Args[0], "exec "+imageBinary+" serve") {
		t.Fatalf("%s: start script does not exec %s serve:\n%s", where, imageBinary, c.Args[0])
	}
	n := deployNode{where: where, env: map[string]string{}}
	for _, line := range strings.Split(strings.TrimSpace(sim.run(t, where, c.Args[0], env)), "\n") {
		if a, ok := strings.CutPrefix(line, "ARG "); ok {
			n.args = append(n.args, a)
		} else if k, v, ok := strings.Cut(line, "="); ok && k != "PATH" && k != "PWD" && k != "SHLVL" && k != "_" {
			n.env[k] = v
		}
	}
	return n
}

// checkKube checks one set of manifests: every StatefulSet pod resolved, the
// pods together form one cluster, and Services, probes, PDBs and scrape
// settings point at what the pods serve.
func checkKube(t *testing.T, name string, objs kubeObjects, wantRack bool) {
	t.Helper()
	if len(objs.sets) == 0 {
		t.Fatalf("%s: no StatefulSet", name)
	}
	var nodes []resolved
	var voters int
	graceMin := int(server.DefaultConfig().ShutdownTimeout.Seconds()) * 2
	for setName, s := range objs.sets {
		where := name + " StatefulSet " + setName
		spec := s.Template.Spec
		if len(spec.Containers) != 1 {
			t.Fatalf("%s: %d containers, want the runnel one", where, len(spec.Containers))
		}
		c := spec.Containers[0]
		head, ok := objs.services[s.ServiceName]
		if !ok || head.ClusterIP != "None" || !head.PublishNotReadyAddresses || !selects(head.Selector, s.Template.Metadata.Labels) {
			t.Errorf("%s: serviceName %q is not a headless Service publishing not-ready pods of this set", where, s.ServiceName)
		}
		if spec.TerminationGracePeriodSeconds < graceMin {
			t.Errorf("%s: terminationGracePeriodSeconds %d < %d", where, spec.TerminationGracePeriodSeconds, graceMin)
		}
		if !strings.Contains(fmt.Sprint(spec.Affinity.PodAntiAffinity), "topologyKey:kubernetes.io/hostname") {
			t.Errorf("%s: no pod anti-affinity by hostname", where)
		}
		if !slices.ContainsFunc(objs.pdbs, func(sel map[string]string) bool { return selects(sel, s.Template.Metadata.Labels) }) {
			t.Errorf("%s: no PodDisruptionBudget covers the pods", where)
		}
		ports := map[string]int{}
		published := map[int]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
			published[p.ContainerPort] = true
		}
		probePort := func(p any) int {
			if s, ok := p.(string); ok {
				return ports[s]
			}
			return p.(int)
		}
		for i := 0; i < s.Replicas; i++ {
			pod := fmt.Sprintf("%s-%d", setName, i)
			r := resolve(t, kubePod(t, name+" pod "+pod, pod, spec))
			r.published = published
			for _, p := range []struct {
				what  string
				probe *kubeProbe
				want  string
			}{{"livenessProbe", c.LivenessProbe, livezPath}, {"readinessProbe", c.ReadinessProbe, readyzPath}, {"startupProbe", c.StartupProbe, livezPath}} {
				if p.probe == nil || p.probe.HTTPGet == nil {
					if p.what != "startupProbe" {
						t.Errorf("%s: no HTTP %s", r.where, p.what)
					}
					continue
				}
				checkProbe(t, r, p.what, p.probe.HTTPGet.Path, probePort(p.probe.HTTPGet.Port), p.want)
			}
			if a := s.Template.Metadata.Annotations; a["prometheus.io/scrape"] == "true" {
				if a["prometheus.io/path"] != metricsPath || portOrZero(a["prometheus.io/port"]) != portOf(t, r.where, r.http) {
					t.Errorf("%s: scrape annotations %v, runnel serves %s on %s", r.where, a, metricsPath, r.http)
				}
			}
			if !slices.ContainsFunc(c.VolumeMounts, func(m struct {
				Name      string `yaml:"name"`
				MountPath string `yaml:"mountPath"`
			}) bool {
				return m.MountPath == r.dataDir && slices.ContainsFunc(s.VolumeClaimTemplates, func(v struct {
					Metadata kubeMeta `yaml:"metadata"`
				}) bool {
					return v.Metadata.Name == m.Name
				})
			}) {
				t.Errorf("%s: data dir %s is not on a volumeClaimTemplate", r.where, r.dataDir)
			}
			checkKubeAddresses(t, r, pod, s.ServiceName, objs)
			if r.has(server.RoleController) {
				voters++
			}
			if want := map[bool]string{true: simZone}[wantRack]; r.rack != want {
				t.Errorf("%s: rack %q, want %q", r.where, r.rack, want)
			}
			nodes = append(nodes, r)
		}
	}
	checkCluster(t, name, nodes)
	if len(nodes[0].ctrls) != voters {
		t.Errorf("%s: --controllers lists %d voters, the StatefulSets run %d controller pods", name, len(nodes[0].ctrls), voters)
	}
	checkKubeServices(t, name, objs)
}

// checkKubeAddresses: Raft and HTTP are advertised under the pod's stable
// name; Kafka under it too, or under the pod's external Service.
func checkKubeAddresses(t *testing.T, r resolved, pod, headless string, objs kubeObjects) {
	t.Helper()
	stable := pod + "." + headless
	for _, adv := range []string{r.raftAdv, r.httpAdv} {
		if host, _ := splitPort(t, r.where, adv); host != stable && !strings.HasPrefix(host, stable+".") {
			t.Errorf("%s: advertises %s, not the stable name %s", r.where, adv, stable)
		}
	}
	if r.kafka == "" {
		return
	}
	host, port := splitPort(t, r.where, r.kafkaAdv)
	if host == stable || strings.HasPrefix(host, stable+".") {
		if port != portOf(t, r.where, r.kafka) {
			t.Errorf("%s: advertises Kafka %s, listens on %s", r.where, r.kafkaAdv, r.kafka)
		}
		return
	}
	ext, ok := objs.services[pod+"-external"]
	if !ok || ext.Selector["statefulset.kubernetes.io/pod-name"] != pod || len(ext.Ports) != 1 {
		t.Errorf("%s: advertises Kafka %s, but there is no %s-external Service for it", r.where, r.kafkaAdv, pod)
		return
	}
	want := ext.Ports[0].Port
	if ext.Type == "NodePort" {
		want = ext.Ports[0].NodePort
		if host != simHostIP {
			t.Errorf("%s: advertises Kafka on %s, the pod's node is %s", r.where, host, simHostIP)
		}
	}
	if port != want {
		t.Errorf("%s: advertises Kafka port %d, its %s Service opens %d", r.where, port, ext.Type, want)
	}
}

// checkKubeServices: every Service selects pods and targets ports they have;
// a ServiceMonitor scrapes /metrics on the http port of a selected Service.
func checkKubeServices(t *testing.T, name string, objs kubeObjects) {
	t.Helper()
	for svcName, svc := range objs.services {
		found := false
		for setName, s := range objs.sets {
			labels := map[string]string{"statefulset.kubernetes.io/pod-name": ""}
			for k, v := range s.Template.Metadata.Labels {
				labels[k] = v
			}
			if pod := svc.Selector["statefulset.kubernetes.io/pod-name"]; strings.HasPrefix(pod, setName+"-") {
				labels["statefulset.kubernetes.io/pod-name"] = pod
			}
			if !selects(svc.Selector, labels) {
				continue
			}
			found = true
			for _, p := range svc.Ports {
				ok := slices.ContainsFunc(s.Template.Spec.Containers[0].Ports, func(cp struct {
					Name          string `yaml:"name"`
					ContainerPort int    `yaml:"containerPort"`
				}) bool {
					return cp.Name == p.TargetPort || cp.ContainerPort == p.TargetPort
				})
				if !ok && p.Name != "kafka" || !ok && s.Template.Metadata.Labels["runnel.io/broker"] != "false" {
					t.Errorf("%s: Service %s port %s targets %v, which StatefulSet %s does not open", name, svcName, p.Name, p.TargetPort, setName)
				}
			}
		}
		if !found {
			t.Errorf("%s: Service %s selects no runnel pods", name, svcName)
		}
	}
	for _, m := range objs.monitors {
		ok := false
		for svcName := range objs.services {
			if selects(m.Selector.MatchLabels, objs.meta["Service/"+svcName].Labels) {
				ok = true
			}
		}
		if !ok || len(m.Endpoints) != 1 || m.Endpoints[0].Port != "http" || m.Endpoints[0].Path != metricsPath {
			t.Errorf("%s: ServiceMonitor %+v does not scrape %s on a runnel Service's http port", name, m, metricsPath)
		}
	}
}

func TestDeployKubernetesManifests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(deployDir, "kubernetes/manifests/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("namespace:")) {
			t.Errorf("%s: sets a namespace; the plain manifests are namespace-agnostic", f)
		}
		all = append(append(all, b...), "\n---\n"...)
	}
	checkKube(t, "manifests", parseKube(t, "manifests", all), true)
}

// helm runs helm from the Go module proxy (built once, then cached by go run).
// The first call builds helm from source: minutes on a loaded 2-core machine
// (a CI run beside other work took more than 10), so it is bounded by the
// test binary's deadline, not a fixed time (untilTestDeadline).
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := untilTestDeadline(t)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", helmCmd}, args...)...)
	cmd.Dir = moduleRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

func TestDeployHelmChart(t *testing.T) {
	if os.Getenv("RUNNEL_SKIP_HELM") != "" {
		t.Skip("RUNNEL_SKIP_HELM is set")
	}
	chart := filepath.Join("deploy", "kubernetes", "helm", "runnel")
	if out, err := helm(t, "lint", "--strict", chart); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, v := range []struct {
		name     string
		set      []string
		wantRack bool
	}{
		{"defaults", nil, false},
		{"five-voters", []string{"controllers.replicas=5", "extraArgs={--log-level=debug,--max-open-files=4096}"}, false},
		{"dedicated", []string{"controllers.roles=controller", "brokers.replicas=3"}, false},
		{"combined-plus-brokers-nodeport", []string{"brokers.replicas=2", "externalAccess.enabled=true", "antiAffinity=soft"}, false},
		{"loadbalancer", []string{"externalAccess.enabled=true", "externalAccess.type=LoadBalancer",
			"externalAccess.loadBalancer.addresses={k0.example.com,k1.example.com,k2.example.com:19092}"}, false},
		{"rack-and-servicemonitor", []string{"rack.source=podLabel", "metrics.serviceMonitor.enabled=true"}, true},
		{"rack-from-node", []string{"rack.source=nodeLabel", "rack.kubectlImage=example.invalid/kubectl:1", "brokers.replicas=1"}, true},
	} {
		t.Run(v.name, func(t *testing.T) {
			args := []string{"template", "rn", chart, "--namespace", "streams"}
			for _, s := range v.set {
				args = append(args, "--set", s)
			}
			out, err := helm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			checkKube(t, "helm "+v.name, parseKube(t, "helm "+v.name, out), v.wantRack)
		})
	}
	// The chart refuses settings that cannot make a cluster.
	for _, bad := range [][]string{{"controllers.replicas=0"}, {"controllers.roles=controller"},
		{"externalAccess.enabled=true", "externalAccess.type=LoadBalancer"}} {
		args := []string{"template", "rn", chart}
		for _, s := range bad {
			args = append(args, "--set", s)
		}
		if _, err := helm(t, args...); err == nil {
			t.Errorf("helm template with %v succeeded, want a refusal", bad)
		}
	}
}
