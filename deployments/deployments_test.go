// Package deployments checks every file under deployments/ with the tool
// that can judge it here: systemd-analyze for the units, a YAML parse plus
// structural checks for the Kubernetes manifests, the millrace CLI itself for
// every command line the files run, and the metric names the Grafana
// dashboard queries against the metrics the components register.
package deployments

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"millrace/agents/beacon"
	"millrace/agents/ship"
	"millrace/agents/tail"
	"millrace/broker"
	"millrace/sinks/lake"
	"millrace/sinks/store"
)

// staticBin is millrace built as deployments/container/Containerfile builds
// it (CGO_ENABLED=0, -trimpath), once for all tests by TestMain.
var staticBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "millrace-deployments-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	staticBin = filepath.Join(dir, "millrace")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", staticBin, "millrace/pipeline/cmd/millrace")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "static build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// acceptsArgs runs the CLI with args plus --help: every flag before --help is
// parsed, so an unknown flag or command fails.
func acceptsArgs(t *testing.T, bin, where string, args []string) {
	t.Helper()
	out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput()
	if err != nil {
		t.Errorf("%s: millrace %s is rejected by the CLI: %v\n%s", where, strings.Join(args, " "), err, out)
	}
}

func TestContainerBinaryIsStatic(t *testing.T) {
	bin := staticBin
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the container binary has a dynamic loader: it would not run FROM scratch")
		}
	}
	containerfile, err := os.ReadFile("container/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(containerfile, []byte("CGO_ENABLED=0 go build -trimpath")) {
		t.Error("Containerfile no longer builds the way this test checks")
	}
}

var execStart = regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/millrace (.*)$`)

// TestSystemdUnits verifies every unit with systemd-analyze, against the
// binary built from this checkout in place of /usr/local/bin/millrace, and
// runs each ExecStart command line through the CLI.
func TestSystemdUnits(t *testing.T) {
	bin := staticBin
	units, _ := filepath.Glob("systemd/*.service")
	if len(units) < 4 {
		t.Fatalf("found %d units, want broker, tail, beacon and sink", len(units))
	}
	dir := t.TempDir()
	for _, unit := range units {
		text, err := os.ReadFile(unit)
		if err != nil {
			t.Fatal(err)
		}
		m := execStart.FindSubmatch(text)
		if m == nil {
			t.Errorf("%s: no ExecStart=/usr/local/bin/millrace", unit)
			continue
		}
		if args := strings.Fields(string(m[1])); !strings.HasPrefix(args[len(args)-1], "$") {
			acceptsArgs(t, bin, unit, args)
		}
		local := filepath.Join(dir, filepath.Base(unit))
		if err := os.WriteFile(local, bytes.ReplaceAll(text, []byte("/usr/local/bin/millrace"), []byte(bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("systemd-analyze", "verify", "--man=no", local).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
		}
	}
}

// TestKubernetesManifests parses every manifest and checks what the API
// server would refuse or what would never become ready: missing kinds or
// names, selectors that do not match their pod labels, containers without
// images, and millrace command lines the CLI rejects.
func TestKubernetesManifests(t *testing.T) {
	bin := staticBin
	files, _ := filepath.Glob("kubernetes/*.yaml")
	kinds := map[string]int{}
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(f)
		for i := 0; ; i++ {
			var doc map[string]any
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s document %d: %v", file, i, err)
			}
			where := file + " " + str(doc, "kind") + "/" + str(doc, "metadata", "name")
			if str(doc, "apiVersion") == "" || str(doc, "kind") == "" || str(doc, "metadata", "name") == "" {
				t.Errorf("%s document %d lacks apiVersion, kind or metadata.name", file, i)
			}
			kinds[str(doc, "kind")]++
			switch str(doc, "kind") {
			case "Deployment", "StatefulSet", "DaemonSet":
				checkWorkload(t, bin, where, doc)
			}
		}
		f.Close()
	}
	for _, k := range []string{"StatefulSet", "DaemonSet", "Deployment", "Service", "ConfigMap"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests", k)
		}
	}
}

func checkWorkload(t *testing.T, bin, where string, doc map[string]any) {
	t.Helper()
	selector, _ := get(doc, "spec", "selector", "matchLabels").(map[string]any)
	labels, _ := get(doc, "spec", "template", "metadata", "labels").(map[string]any)
	if len(selector) == 0 {
		t.Errorf("%s: no selector", where)
	}
	for k, v := range selector {
		if labels[k] != v {
			t.Errorf("%s: selector %s=%v does not match the pod labels %v", where, k, v, labels)
		}
	}
	containers, _ := get(doc, "spec", "template", "spec", "containers").([]any)
	if len(containers) == 0 {
		t.Errorf("%s: no containers", where)
	}
	for _, c := range containers {
		c := c.(map[string]any)
		if str(c, "image") == "" {
			t.Errorf("%s: container %s has no image", where, str(c, "name"))
		}
		if !strings.HasPrefix(str(c, "image"), "millrace") {
			continue
		}
		if args := strs(c["args"]); len(args) > 0 {
			acceptsArgs(t, bin, where, args)
		}
		// A shell command line: check the millrace part with the shell
		// expansions replaced by plausible values.
		if cmd := strs(c["command"]); len(cmd) == 3 && cmd[0] == "sh" {
			line := regexp.MustCompile(`\$\(\(.*?\)\)|\$\{[A-Z]+\}`).ReplaceAllString(cmd[2], "1")
			line = strings.TrimPrefix(line, "exec /millrace ")
			acceptsArgs(t, bin, where, strings.Fields(line))
		}
	}
}

func get(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

func str(m map[string]any, path ...string) string {
	s, _ := get(m, path...).(string)
	return s
}

func strs(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// descRecorder is a Registerer that keeps the names of the metrics
// registered with it, labelled or not.
type descRecorder struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *descRecorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}

func (r *descRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		r.Register(c)
	}
}

func (r *descRecorder) Unregister(prometheus.Collector) bool { return true }

// TestGrafanaDashboard checks the dashboard is valid JSON and every
// millrace metric it queries is one the components register.
func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile("grafana/millrace-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatal("dashboard lacks uid, title or panels")
	}

	rec := &descRecorder{names: map[string]bool{}}
	shipper, err := ship.New(ship.Config{Brokers: []string{"127.0.0.1:1"}}, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer shipper.Close()
	if _, err := tail.New(tail.Config{Paths: []string{"/nonexistent/*.log"}, Topic: "t", DataDir: t.TempDir()}, shipper, rec, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := beacon.New(beacon.Config{}, shipper, rec, nil); err != nil {
		t.Fatal(err)
	}
	st, err := store.NewFile(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lake.New(lake.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, Schema: "click"}, st, rec, nil); err != nil {
		t.Fatal(err)
	}
	// A broker registers its metrics when it opens.
	bc := broker.DefaultConfig()
	bc.DataDir, bc.Kafka.Listener, bc.Metrics = t.TempDir(), "127.0.0.1:0", rec
	b, err := broker.Open(bc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	metric := regexp.MustCompile(`\bmillrace_[a-z_]+`)
	queried := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, target := range p.Targets {
			for _, name := range metric.FindAllString(target.Expr, -1) {
				queried[name] = true
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				if !rec.names[name] && !rec.names[base] {
					t.Errorf("panel %q queries %s, which no component registers", p.Title, name)
				}
			}
		}
	}
	// What Kafka operators watch first must stay on the dashboard.
	for _, name := range []string{
		"millrace_broker_under_replicated_partitions", "millrace_broker_isr_shrinks_total", "millrace_broker_isr_expands_total",
		"millrace_broker_leader_partitions", "millrace_broker_active_controller", "millrace_broker_log_dir_usable_bytes",
	} {
		if !queried[name] {
			t.Errorf("no panel queries %s", name)
		}
	}
}
