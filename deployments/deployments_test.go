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
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"millrace/agents/beacon"
	"millrace/agents/ship"
	"millrace/agents/tail"
	"millrace/broker"
	"millrace/sinks/lake"
	"millrace/store"
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
		checkCommentedSecurity(t, bin, unit, string(text))
	}
}

var (
	commentedProperty = regexp.MustCompile(`(?m)^#   ([a-z][a-z0-9.]*)=(.*)$`)
	commentedCommand  = regexp.MustCompile(`(?m)^#(?:ExecStart=/usr/local/bin/millrace|   millrace) (.*)$`)
	commentedSinkArgs = regexp.MustCompile(`(?m)^#   SINK_ARGS=(.*)$`)
	commentedShip     = regexp.MustCompile(`(?m)^#   ship:\n(?:#     .*\n)+`)
)

// checkCommentedSecurity checks the security settings a unit carries in
// comments, to be turned on by hand: broker properties a broker accepts
// (a SASL_SSL listener, keystore, truststore, authorizer, super users), a
// ship: section with valid tls: and sasl:, or the sink's client flags; and
// every millrace command line among them is one the CLI takes.
func checkCommentedSecurity(t *testing.T, bin, unit, text string) {
	t.Helper()
	found := false
	if props := commentedProperty.FindAllStringSubmatch(text, -1); len(props) > 0 {
		found = true
		cfg := broker.DefaultConfig()
		set := map[string]string{}
		for _, p := range props {
			set[p[1]] = p[2]
			if err := cfg.Set(p[1], p[2]); err != nil {
				t.Errorf("%s: commented setting %s=%s: %v", unit, p[1], p[2], err)
			}
		}
		cfg.DataDir = t.TempDir()
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: the commented broker settings do not validate: %v", unit, err)
		}
		for _, name := range []string{"listeners", "ssl.keystore.location", "ssl.truststore.location", "authorizer.class.name", "super.users"} {
			if set[name] == "" {
				t.Errorf("%s: no commented %s", unit, name)
			}
		}
		if !strings.Contains(set["listeners"], "SASL_SSL://") {
			t.Errorf("%s: the commented listeners=%s has no SASL_SSL listener", unit, set["listeners"])
		}
	}
	for _, m := range commentedCommand.FindAllStringSubmatch(text, -1) {
		acceptsArgs(t, bin, unit, strings.Fields(m[1]))
	}
	for _, m := range commentedSinkArgs.FindAllStringSubmatch(text, -1) {
		acceptsArgs(t, bin, unit, append([]string{"sink"}, strings.Fields(m[1])...))
		found = found || strings.Contains(m[1], "--tls-ca") && strings.Contains(m[1], "--sasl-mechanism")
	}
	if block := commentedShip.FindString(text); block != "" {
		found = true
		var cfg struct {
			Ship ship.Config `yaml:"ship"`
		}
		dec := yaml.NewDecoder(strings.NewReader(regexp.MustCompile(`(?m)^#   `).ReplaceAllString(block, "")))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil {
			t.Errorf("%s: the commented ship: section: %v", unit, err)
		} else if sec := cfg.Ship.Security; sec.TLS == nil || sec.SASL == nil {
			t.Errorf("%s: the commented ship: section lacks tls: or sasl:", unit)
		} else if err := sec.Validate(); err != nil {
			t.Errorf("%s: the commented ship: section: %v", unit, err)
		}
	}
	if !found {
		t.Errorf("%s: no commented security settings (broker properties, ship: tls:/sasl:, or SINK_ARGS with --tls-ca and --sasl-mechanism)", unit)
	}
}

// manifest is one document of a Kubernetes manifest file.
type manifest struct {
	where string // file kind/name, for messages
	doc   map[string]any
}

// TestKubernetesManifests parses every manifest and checks what the API
// server would refuse or what would never become ready: missing kinds or
// names, selectors that do not match their pod labels, containers without
// images, millrace command lines the CLI rejects, files a container reads
// that no volume it mounts provides, Secrets with anything but placeholders,
// and NetworkPolicies that select no pod or name a port no pod has.
func TestKubernetesManifests(t *testing.T) {
	bin := staticBin
	files, _ := filepath.Glob("kubernetes/*.yaml")
	kinds := map[string]int{}
	var all []manifest
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
			case "Deployment", "StatefulSet", "DaemonSet", "Job":
				checkWorkload(t, bin, where, doc)
			}
			all = append(all, manifest{where, doc})
		}
		f.Close()
	}
	for _, k := range []string{"StatefulSet", "DaemonSet", "Deployment", "Job", "Service", "ConfigMap", "Secret", "NetworkPolicy"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests", k)
		}
	}
	checkSecrets(t, all)
	checkNetworkPolicies(t, all)
}

func checkWorkload(t *testing.T, bin, where string, doc map[string]any) {
	t.Helper()
	if str(doc, "kind") != "Job" {
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
	}
	containers, _ := get(doc, "spec", "template", "spec", "containers").([]any)
	if len(containers) == 0 {
		t.Errorf("%s: no containers", where)
	}
	inits, _ := get(doc, "spec", "template", "spec", "initContainers").([]any)
	for _, c := range append(containers, inits...) {
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

// secretFile is how millrace's configurations name a mounted certificate or
// credential: a file in a directory of /etc/millrace.
var secretFile = regexp.MustCompile(`/etc/millrace/[a-z]+/[A-Za-z0-9._-]+`)

// checkSecrets checks that the Secrets hold placeholders only, and that every
// certificate or credential file a millrace container is told to read (on its
// command line, in its environment or in a ConfigMap it reads) is a key of a
// Secret or ConfigMap mounted at that path in that container.
func checkSecrets(t *testing.T, all []manifest) {
	t.Helper()
	keys := map[string]map[string]bool{} // "Secret/name" or "ConfigMap/name" -> keys
	texts := map[string]string{}         // "ConfigMap/name" -> every value
	for _, m := range all {
		kind, name := str(m.doc, "kind"), str(m.doc, "metadata", "name")
		switch kind {
		case "Secret":
			if m.doc["data"] != nil {
				t.Errorf("%s: base64 data: in a Secret template; use stringData: placeholders", m.where)
			}
			data, _ := m.doc["stringData"].(map[string]any)
			keys[kind+"/"+name] = map[string]bool{}
			for k, v := range data {
				keys[kind+"/"+name][k] = true
				if s, _ := v.(string); !strings.Contains(s, "replace-me") || strings.Contains(s, "-----BEGIN") {
					t.Errorf("%s: %s is not a placeholder (replace-me, no PEM block)", m.where, k)
				}
			}
		case "ConfigMap":
			data, _ := m.doc["data"].(map[string]any)
			keys[kind+"/"+name] = map[string]bool{}
			for k, v := range data {
				keys[kind+"/"+name][k] = true
				s, _ := v.(string)
				texts[kind+"/"+name] += s + "\n"
			}
		}
	}
	for _, m := range all {
		spec, _ := get(m.doc, "spec", "template", "spec").(map[string]any)
		if spec == nil {
			continue
		}
		// The files each volume provides, by volume name.
		volumes := map[string]map[string]bool{}
		for _, v := range spec["volumes"].([]any) {
			v := v.(map[string]any)
			ref, kind := "", ""
			var source map[string]any
			if s, ok := v["secret"].(map[string]any); ok {
				ref, kind, source = str(s, "secretName"), "Secret", s
			} else if c, ok := v["configMap"].(map[string]any); ok {
				ref, kind, source = str(c, "name"), "ConfigMap", c
			} else {
				continue
			}
			have, ok := keys[kind+"/"+ref]
			if !ok {
				t.Errorf("%s: volume %s mounts %s %s, which no manifest defines", m.where, str(v, "name"), kind, ref)
				continue
			}
			files := map[string]bool{}
			items, _ := source["items"].([]any)
			for _, it := range items {
				it := it.(map[string]any)
				if !have[str(it, "key")] {
					t.Errorf("%s: volume %s takes key %s, which %s %s lacks", m.where, str(v, "name"), str(it, "key"), kind, ref)
				}
				files[str(it, "path")] = true
			}
			if len(items) == 0 {
				files = have
			}
			volumes[str(v, "name")] = files
		}
		inits, _ := spec["initContainers"].([]any)
		containers, _ := spec["containers"].([]any)
		for _, c := range append(containers, inits...) {
			c := c.(map[string]any)
			if !strings.HasPrefix(str(c, "image"), "millrace") {
				continue
			}
			mounted := map[string]bool{}
			var text strings.Builder
			for _, vm := range c["volumeMounts"].([]any) {
				vm := vm.(map[string]any)
				for f := range volumes[str(vm, "name")] {
					mounted[str(vm, "mountPath")+"/"+f] = true
				}
				for ref, s := range texts {
					if get(findVolume(spec, str(vm, "name")), "configMap", "name") == strings.TrimPrefix(ref, "ConfigMap/") {
						text.WriteString(s)
					}
				}
			}
			for _, e := range anyList(c["envFrom"]) {
				text.WriteString(texts["ConfigMap/"+str(e.(map[string]any), "configMapRef", "name")])
			}
			text.WriteString(strings.Join(strs(c["args"]), " ") + " " + strings.Join(strs(c["command"]), " "))
			for _, path := range secretFile.FindAllString(text.String(), -1) {
				if !mounted[path] {
					t.Errorf("%s: container %s reads %s, which none of its volumes provides", m.where, str(c, "name"), path)
				}
			}
		}
	}
}

func findVolume(spec map[string]any, name string) map[string]any {
	for _, v := range anyList(spec["volumes"]) {
		if v := v.(map[string]any); str(v, "name") == name {
			return v
		}
	}
	return nil
}

func anyList(v any) []any {
	list, _ := v.([]any)
	return list
}

// selects reports whether a NetworkPolicy label selector selects a pod with
// labels (matchLabels and In expressions, all that the manifests use).
func selects(selector map[string]any, labels map[string]any) bool {
	matchLabels, _ := get(selector, "matchLabels").(map[string]any)
	for k, v := range matchLabels {
		if labels[k] != v {
			return false
		}
	}
	for _, e := range anyList(selector["matchExpressions"]) {
		e := e.(map[string]any)
		if str(e, "operator") != "In" || !slices.Contains(strs(e["values"]), fmt.Sprint(labels[str(e, "key")])) {
			return false
		}
	}
	return true
}

// checkNetworkPolicies checks that ingress is denied by default, that each
// policy selects pods and names ports they have, that each pod peer selects
// a pod, and that ZooKeeper's client port is open to the brokers alone.
func checkNetworkPolicies(t *testing.T, all []manifest) {
	t.Helper()
	type pod struct {
		labels map[string]any
		ports  map[string]bool
	}
	var pods []pod
	for _, m := range all {
		labels, _ := get(m.doc, "spec", "template", "metadata", "labels").(map[string]any)
		if labels == nil {
			continue
		}
		p := pod{labels: labels, ports: map[string]bool{}}
		for _, c := range anyList(get(m.doc, "spec", "template", "spec", "containers")) {
			for _, port := range anyList(c.(map[string]any)["ports"]) {
				p.ports[str(port.(map[string]any), "name")] = true
			}
		}
		pods = append(pods, p)
	}
	matching := func(selector map[string]any) []pod {
		var out []pod
		for _, p := range pods {
			if selects(selector, p.labels) {
				out = append(out, p)
			}
		}
		return out
	}
	defaultDeny := false
	for _, m := range all {
		if str(m.doc, "kind") != "NetworkPolicy" {
			continue
		}
		selector, _ := get(m.doc, "spec", "podSelector").(map[string]any)
		ingress := anyList(get(m.doc, "spec", "ingress"))
		if len(selector) == 0 {
			defaultDeny = defaultDeny || len(ingress) == 0
			continue
		}
		selected := matching(selector)
		if len(selected) == 0 {
			t.Errorf("%s selects no pod", m.where)
		}
		zookeeper := false
		for _, p := range selected {
			zookeeper = zookeeper || p.labels["app"] == "zookeeper"
		}
		for _, rule := range ingress {
			rule := rule.(map[string]any)
			ports := anyList(rule["ports"])
			for _, port := range ports {
				name := fmt.Sprint(port.(map[string]any)["port"])
				for _, p := range selected {
					if !p.ports[name] {
						t.Errorf("%s: port %s is not a port of the pods %v", m.where, name, p.labels)
					}
				}
			}
			for _, peer := range anyList(rule["from"]) {
				ps, _ := peer.(map[string]any)["podSelector"].(map[string]any)
				if ps != nil && peer.(map[string]any)["namespaceSelector"] == nil && len(matching(ps)) == 0 {
					t.Errorf("%s: a peer selects no pod: %v", m.where, ps)
				}
			}
			opensClient := len(ports) == 0
			for _, port := range ports {
				opensClient = opensClient || port.(map[string]any)["port"] == "client"
			}
			if zookeeper && opensClient {
				for _, peer := range anyList(rule["from"]) {
					ps, _ := peer.(map[string]any)["podSelector"].(map[string]any)
					if ps == nil || peer.(map[string]any)["namespaceSelector"] != nil || fmt.Sprint(ps) != fmt.Sprint(map[string]any{"matchLabels": map[string]any{"app": "millrace-broker"}}) {
						t.Errorf("%s: ZooKeeper's client port is open to %v, not to the brokers alone", m.where, peer)
					}
				}
				if len(anyList(rule["from"])) == 0 {
					t.Errorf("%s: ZooKeeper's client port is open to everyone", m.where)
				}
			}
		}
	}
	if !defaultDeny {
		t.Error("no NetworkPolicy denies ingress by default (podSelector {} without ingress rules)")
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
