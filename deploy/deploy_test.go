// Package deploy holds example deployments of tableproxy (see README.md).
// Its test runs `tableproxy check-config` on the command line and the
// configuration of every proxy the examples start, so they cannot drift
// from the flags and options the binary takes.
package deploy

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// binary builds tableproxy once for the test, unless TABLEPROXY_BIN names
// one.
func binary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("TABLEPROXY_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "tableproxy")
	out, err := exec.Command("go", "build", "-o", bin, "tableproxy/cmd/tableproxy").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// invocation is one command line of the proxy an example starts: its
// arguments after the binary's name, with the files it names mapped to
// their contents in the example.
type invocation struct {
	where string
	args  []string
	env   map[string]string // the environment the example gives it
}

// check runs check-config with inv's arguments (serve's become
// check-config's) and fails unless it says the configuration is valid.
func check(t *testing.T, bin string, inv invocation) {
	t.Helper()
	if len(inv.args) == 0 {
		t.Fatalf("%s: no arguments", inv.where)
	}
	switch inv.args[0] {
	case "serve", "check-config":
	default:
		t.Fatalf("%s: runs %q, not serve or check-config", inv.where, inv.args[0])
	}
	cmd := exec.Command(bin, append([]string{"check-config"}, inv.args[1:]...)...)
	cmd.Env = os.Environ()
	for k, v := range inv.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "the configuration is valid") {
		t.Errorf("%s: tableproxy check-config %s: %v\n%s", inv.where, strings.Join(inv.args[1:], " "), err, out)
	}
}

// The systemd unit's ExecStartPre and ExecStart lines, with the config
// beside the unit, and the password files it names, in a directory in
// place of /etc/tableproxy.
func TestSystemdUnit(t *testing.T) {
	bin := binary(t)
	etc := t.TempDir()
	conf, err := os.ReadFile("systemd/tableproxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	conf = []byte(strings.ReplaceAll(string(conf), "/etc/tableproxy/", etc+"/"))
	if err := os.WriteFile(filepath.Join(etc, "tableproxy.yaml"), conf, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`password_file: (\S+)`).FindAllStringSubmatch(string(conf), -1) {
		if err := os.WriteFile(m[1], []byte("example-password\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open("systemd/tableproxy.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		key, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || (key != "ExecStart" && key != "ExecStartPre") {
			continue
		}
		fields := strings.Fields(strings.TrimLeft(val, "-@:+!"))
		if filepath.Base(fields[0]) != "tableproxy" {
			continue
		}
		args := fields[1:]
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "/etc/tableproxy/", etc+"/")
		}
		check(t, bin, invocation{where: "systemd/tableproxy.service:" + strconv.Itoa(line), args: args})
		n++
	}
	if n < 2 {
		t.Fatalf("found %d tableproxy command lines in the unit, want ExecStartPre and ExecStart", n)
	}
}

// k8sEnvValues stand in for what Kubernetes fills in at run time.
var k8sEnvValues = map[string]string{
	"metadata.name": "", // the pod's name: set per case below
	"status.podIP":  "10.1.2.3",
}

var k8sVarRE = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// Every tableproxy container of the Kubernetes examples, with the files
// of the ConfigMaps it mounts, and for a StatefulSet as its first pod
// (the seed) and as another.
func TestKubernetesManifests(t *testing.T) {
	bin := binary(t)
	files, _ := filepath.Glob("kubernetes/*.yaml")
	n := 0
	for _, file := range files {
		docs := readYAMLDocs(t, file)
		configMaps := map[string]map[string]string{}
		for _, d := range docs {
			if str(d, "kind") == "ConfigMap" {
				data := map[string]string{}
				for k, v := range mapAt(d, "data") {
					data[k], _ = v.(string)
				}
				configMaps[str(mapAt(d, "metadata"), "name")] = data
			}
		}
		for _, d := range docs {
			kind := str(d, "kind")
			if kind != "Deployment" && kind != "StatefulSet" {
				continue
			}
			name := str(mapAt(d, "metadata"), "name")
			pods := []string{name + "-7f9c-abcde"}
			if kind == "StatefulSet" {
				pods = []string{name + "-0", name + "-1"}
			}
			pod := mapAt(mapAt(d, "spec", "template"), "spec")
			volumes := map[string]string{} // volume name -> ConfigMap name
			for _, v := range list(pod, "volumes") {
				vm, _ := v.(map[string]any)
				if cm := mapAt(vm, "configMap"); cm != nil {
					volumes[str(vm, "name")] = str(cm, "name")
				}
			}
			for _, c := range list(pod, "containers") {
				cm, _ := c.(map[string]any)
				if !strings.Contains(str(cm, "image"), "tableproxy") {
					continue
				}
				checkProbes(t, file+": "+kind+" "+name, cm, configMaps)
				for _, podName := range pods {
					where := file + ": " + kind + " " + name + ", pod " + podName
					dir := t.TempDir()
					paths := map[string]string{} // mount path -> local dir
					for _, m := range list(cm, "volumeMounts") {
						mm, _ := m.(map[string]any)
						cmName, ok := volumes[str(mm, "name")]
						if !ok {
							continue
						}
						data, ok := configMaps[cmName]
						if !ok {
							t.Fatalf("%s: ConfigMap %q is not in the file", where, cmName)
						}
						local := filepath.Join(dir, str(mm, "name"))
						if err := os.MkdirAll(local, 0o755); err != nil {
							t.Fatal(err)
						}
						for f, content := range data {
							if err := os.WriteFile(filepath.Join(local, f), []byte(content), 0o644); err != nil {
								t.Fatal(err)
							}
						}
						paths[str(mm, "mountPath")] = local
					}
					env := map[string]string{}
					for _, e := range list(cm, "env") {
						em, _ := e.(map[string]any)
						val := str(em, "value")
						if ref := mapAt(em, "valueFrom", "fieldRef"); ref != nil {
							val = k8sEnvValues[str(ref, "fieldPath")]
							if str(ref, "fieldPath") == "metadata.name" {
								val = podName
							}
						} else if mapAt(em, "valueFrom", "secretKeyRef") != nil {
							val = "secret-" + str(em, "name")
						}
						env[str(em, "name")] = val
					}
					var args []string
					for _, a := range append(list(cm, "command"), list(cm, "args")...) {
						s, _ := a.(string)
						s = k8sVarRE.ReplaceAllStringFunc(s, func(m string) string {
							v, ok := env[m[2:len(m)-1]]
							if !ok {
								t.Errorf("%s: %s is not in the container's env", where, m)
							}
							return v
						})
						for mount, local := range paths {
							s = strings.ReplaceAll(s, mount+"/", local+"/")
						}
						args = append(args, s)
					}
					if len(args) == 0 || filepath.Base(args[0]) != "tableproxy" {
						t.Fatalf("%s: the container does not run tableproxy: %q", where, args)
					}
					check(t, bin, invocation{where: where, args: args[1:], env: env})
					n++
				}
			}
		}
	}
	if n < 3 {
		t.Fatalf("checked %d proxy command lines in the Kubernetes examples, want the voters' (two pods) and the sidecar's", n)
	}
}

func readYAMLDocs(t *testing.T, file string) []map[string]any {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var docs []map[string]any
	dec := yaml.NewDecoder(f)
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			if errors.Is(err, io.EOF) {
				return docs
			}
			t.Fatalf("%s: %v", file, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// mapAt follows keys down nested maps; nil where one is missing.
func mapAt(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, _ := m[k].(map[string]any)
		if next == nil {
			return nil
		}
		m = next
	}
	return m
}

func str(m map[string]any, key string) string { s, _ := m[key].(string); return s }

func list(m map[string]any, key string) []any { l, _ := m[key].([]any); return l }

// checkProbes: a proxy container is probed on its metrics port, /readyz
// for readiness and /healthz for liveness, and its configuration serves
// metrics (and so the probes) on that port, on an address the kubelet
// reaches.
func checkProbes(t *testing.T, where string, c map[string]any, configMaps map[string]map[string]string) {
	t.Helper()
	ports := map[string]int{}
	for _, p := range list(c, "ports") {
		pm, _ := p.(map[string]any)
		n, _ := pm["containerPort"].(int)
		ports[str(pm, "name")] = n
	}
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		get := mapAt(c, probe, "httpGet")
		if get == nil || str(get, "path") != path {
			t.Errorf("%s: %s is not an HTTP GET of %s", where, probe, path)
			continue
		}
		port, ok := ports[str(get, "port")]
		if !ok {
			t.Errorf("%s: %s's port %q is not a port of the container", where, probe, str(get, "port"))
			continue
		}
		listen := fmt.Sprintf("metrics_listen: 0.0.0.0:%d", port)
		found := false
		for _, data := range configMaps {
			found = found || strings.Contains(data["tableproxy.yaml"], listen)
		}
		if !found {
			t.Errorf("%s: %s probes port %d, but no configuration has %q", where, probe, port, listen)
		}
	}
}

// TestGrafanaDashboard: the dashboard is JSON Grafana loads, and every
// metric its queries use is one docs/operations.md lists.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/tableproxy.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	metricRE := regexp.MustCompile(`tableproxy_[a-z0-9_]+`)
	n := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, m := range metricRE.FindAllString(q.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum")
				if !strings.Contains(string(doc), "`"+base+"`") {
					t.Errorf("panel %q uses %s, which docs/operations.md does not list", p.Title, m)
				}
				n++
			}
		}
	}
	if n < 20 {
		t.Errorf("%d metric uses in %d panels", n, len(dash.Panels))
	}
}
