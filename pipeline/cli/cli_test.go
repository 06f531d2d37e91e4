package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas"
	"millrace/sinks/parquet"
)

func TestMainReportsOneLineErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"topic", "create"}, strings.NewReader(""), &out, &errOut); code != 2 {
		t.Fatalf("exit %d, want 2 for a usage error", code)
	}
	if first := strings.SplitN(errOut.String(), "\n", 2)[0]; first != "millrace topic create: expected 1 argument(s), got 0" {
		t.Fatalf("stderr first line %q", first)
	}
	errOut.Reset()
	if code := Main([]string{"nosuch"}, strings.NewReader(""), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "nosuch"`) {
		t.Fatalf("exit %d stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := Main([]string{"topic", "list", "-b", "127.0.0.1:1"}, strings.NewReader(""), &out, &errOut); code != 1 || strings.Count(errOut.String(), "\n") != 1 {
		t.Fatalf("exit %d stderr %q: want one line and exit 1 for an unreachable broker", code, errOut.String())
	}
	if code := Main([]string{"produce", "t", "--acks", "2"}, strings.NewReader(""), &out, &errOut); code != 2 {
		t.Fatalf("bad --acks: exit %d", code)
	}
}

// TestHelpListsFlags: --help prints the usage line and then every flag
// with its type, text and default, and exits 0; flags without a text
// (fault injection) stay out.
func TestHelpListsFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"sink", "--help"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("sink --help: exit %d, want 0", code)
	}
	help := errOut.String()
	for _, want := range []string{
		"usage: millrace sink -b BROKERS",
		"\nflags:\n",
		"  -b, --brokers string\n        seed brokers, comma-separated (default ",
		"  --roll-rows int\n        end a commit window after N rows (default 1000000)\n",
		"  --field NAME:TYPE\n",
		"  --shutdown-timeout duration\n        how long to publish and commit on shutdown (default 1m0s)\n",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("sink --help lacks %q:\n%s", want, help)
		}
	}
	for _, unwanted := range []string{"crash-after-publish", "  -b string", "(shorthand)"} {
		if strings.Contains(help, unwanted) {
			t.Errorf("sink --help shows %q:\n%s", unwanted, help)
		}
	}
	errOut.Reset()
	if code := Main([]string{"topic", "create", "-h"}, strings.NewReader(""), &out, &errOut); code != 0 ||
		!strings.Contains(errOut.String(), "  -p, --partitions int\n") {
		t.Fatalf("topic create -h: exit %d:\n%s", code, errOut.String())
	}
}

func TestRecordFormat(t *testing.T) {
	r := &kgo.Record{Topic: "t", Partition: 3, Offset: 42, Key: []byte("k"), Value: []byte("v"),
		Timestamp: time.UnixMilli(1700000000123), Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}}
	for format, want := range map[string]string{
		"%v":              "v\n",
		"%k %v":           "k v\n",
		`%t/%p@%o\t%T %h`: "t/3@42\t1700000000123 a=1,b=2\n",
		"100%% %x %v":     "100%% %x v\n",
		"key=%k\n":        "key=k\n",
	} {
		var b bytes.Buffer
		parseFormat(format).write(&b, r)
		if b.String() != want {
			t.Errorf("format %q: got %q, want %q", format, b.String(), want)
		}
	}
}

// Kafka's default partitioner is toPositive(murmur2(key)) % partitions; these
// hashes are the reference values from Kafka's own murmur2 tests, so keys land
// where Java clients put them.
func TestHashPartitionerMatchesKafka(t *testing.T) {
	opts, err := producerOpts("all", "none", "hash")
	if err != nil {
		t.Fatal(err)
	}
	var partitioner kgo.Partitioner
	for _, o := range opts {
		if p, ok := partitionerOf(o); ok {
			partitioner = p
		}
	}
	if partitioner == nil {
		t.Fatal("hash option sets no partitioner")
	}
	tp := partitioner.ForTopic("t")
	for key, murmur := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		for _, n := range []int{1, 3, 6, 7, 100} {
			want := int(murmur&0x7fffffff) % n
			if got := tp.Partition(&kgo.Record{Key: []byte(key)}, n); got != want {
				t.Errorf("key %q over %d partitions: partition %d, Kafka puts it in %d", key, n, got, want)
			}
		}
	}
}

func partitionerOf(o kgo.Opt) (kgo.Partitioner, bool) {
	cl, err := kgo.NewClient(o)
	if err != nil {
		return nil, false
	}
	defer cl.Close()
	p, ok := cl.OptValue(kgo.RecordPartitioner).(kgo.Partitioner)
	return p, ok && p != nil
}

func TestLatencyHistogramQuantiles(t *testing.T) {
	var h latencyHistogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 500 * time.Millisecond, 0.99: 990 * time.Millisecond, 0.999: 999 * time.Millisecond} {
		got := h.quantile(q)
		if got < want || float64(got) > float64(want)*1.051 {
			t.Errorf("p%v = %v, want within 5%% above %v", q*100, got, want)
		}
	}
	if h.max() != time.Second || roundSignificant(1234567*time.Nanosecond) != 1230*time.Microsecond {
		t.Errorf("max %v", h.max())
	}
	var empty latencyHistogram
	if empty.quantile(0.5) != 0 {
		t.Error("empty histogram has a median")
	}
}

func TestLakeInspectLocalPaths(t *testing.T) {
	dir := t.TempDir()
	for i, name := range []string{"a.parquet", "b.parquet"} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		w, err := parquet.NewWriter(f, schemas.Click, parquet.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j <= i; j++ {
			if err := w.Append([]byte(`{"type":"page_view","ts":"2024-05-01T10:00:0`+strconv.Itoa(j)+`Z"}`), time.Time{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for target, want := range map[string]string{
		dir:                             "\ntotal: 2 files, 3 rows\n",
		"file://" + dir:                 "\ntotal: 2 files, 3 rows\n",
		"file://" + dir + "/b.parquet":  "rows: 2\n",
		filepath.Join(dir, "a.parquet"): "ts: min 2024-05-01T10:00:00Z max 2024-05-01T10:00:00Z\n",
	} {
		var out, errOut bytes.Buffer
		if code := Main([]string{"lake", "inspect", target}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("lake inspect %s: exit %d, want %q in:\n%s%s", target, code, want, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"lake", "inspect", t.TempDir()}, strings.NewReader(""), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no .parquet files under") {
		t.Errorf("empty directory: exit %d, stderr %q", code, errOut.String())
	}
}

// runMain runs the command line in-process and returns its exit code,
// standard output and standard error.
func runMain(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestHelpGroupsCommandsByPurpose: `millrace help` lists the commands under
// the titles of their groups, in the groups' order, each command once.
func TestHelpGroupsCommandsByPurpose(t *testing.T) {
	_, _, help := runMain("help")
	sections := map[string]string{} // title -> its lines
	title := ""
	for _, line := range strings.Split(help, "\n") {
		if strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " ") {
			title = line
			continue
		}
		sections[title] += line + "\n"
	}
	for title, commands := range map[string][]string{
		"Run the appliance and watch it:":      {"up", "console", "top"},
		"Brokers, topics, records and groups:": {"broker", "cluster status", "topic create", "produce", "consume", "group reset"},
		"Agents that feed the broker:":         {"tail", "beacon", "syslog", "otlp"},
		"Sinks, the lake and the audit:":       {"sink", "lake inspect", "audit"},
		"Security and administration:":         {"user add", "acl list", "bench produce", "completion", "version"},
	} {
		for _, c := range commands {
			if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(c) + `  +\S`).MatchString(sections[title]) {
				t.Errorf("%q is not listed under %q:\n%s", c, title, help)
			}
		}
	}
	last := -1
	for _, g := range commandGroups {
		i := strings.Index(help, "\n"+g.title+"\n")
		if i <= last {
			t.Errorf("group %q missing or out of order:\n%s", g.title, help)
		}
		last = i
	}
	if strings.Contains(help, "Other commands:") {
		t.Errorf("a command has no group:\n%s", help)
	}
}

// TestEveryCommandHasAGroup: a new top-level command must be put in one
// of commandGroups.
func TestEveryCommandHasAGroup(t *testing.T) {
	root := newRoot(&env{stdout: io.Discard, stderr: io.Discard})
	for _, c := range root.Commands() {
		if c.GroupID == "" && c.Name() != "help" {
			t.Errorf("top-level command %q is in no group: add it to commandGroups in help.go", c.Name())
		}
	}
}

// TestHelpFitsEightyColumns: `millrace help` and every command's --help
// fit a terminal's 80 columns.
func TestHelpFitsEightyColumns(t *testing.T) {
	root := newRoot(&env{stdout: io.Discard, stderr: io.Discard})
	commands := [][]string{nil}
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			p := append(slices.Clone(path), sub.Name())
			commands = append(commands, p)
			walk(sub, p)
		}
	}
	walk(root, nil)
	for _, path := range commands {
		code, _, help := runMain(append(path, "--help")...)
		if code != 0 || help == "" {
			t.Errorf("%v --help: exit %d, %d bytes", path, code, len(help))
		}
		for _, line := range strings.Split(help, "\n") {
			if n := utf8.RuneCountInString(line); n > helpWidth {
				t.Errorf("%v --help: a line of %d columns:\n%s", path, n, line)
			}
		}
	}
	if len(commands) < 30 {
		t.Fatalf("walked %d commands", len(commands))
	}
}

func TestWrap(t *testing.T) {
	for _, c := range []struct{ first, indent, text, want string }{
		{"", "", "short", "short\n"},
		{"usage: ", "       ", "cmd [--a A] [--bb B] [--ccc C]", "usage: cmd [--a A]\n       [--bb B]\n       [--ccc C]\n"},
		// A bracketed part longer than a line is split at its spaces.
		{"", "  ", "x [--lake URL [--s3-endpoint URL]]", "x [--lake URL\n  [--s3-endpoint\n  URL]]\n"},
		{"", "", "one\ntwo", "one\ntwo\n"},
		{"", "", "averyveryverylongword x", "averyveryverylongword\nx\n"},
	} {
		if got := wrap(c.first, c.indent, c.text, 20); got != c.want {
			t.Errorf("wrap(%q, %q, %q, 20) = %q, want %q", c.first, c.indent, c.text, got, c.want)
		}
	}
}

// TestVersionFlag: --version and the version command print the same line.
func TestVersionFlag(t *testing.T) {
	codeFlag, fromFlag, _ := runMain("--version")
	codeCmd, fromCmd, _ := runMain("version")
	if codeFlag != 0 || codeCmd != 0 || fromFlag != "millrace "+Version+"\n" || fromFlag != fromCmd {
		t.Errorf("--version: exit %d %q; version: exit %d %q", codeFlag, fromFlag, codeCmd, fromCmd)
	}
}

// shortFlags is the table of shortflags.go: each letter and the long
// flags it stands for.
var shortFlags = map[string][]string{
	"b": {"brokers"},
	"t": {"topic"},
	"g": {"group"},
	"c": {"config"},
	"p": {"partitions", "partition"},
	"r": {"replication-factor"},
	"n": {"max", "records", "limit"}, // how many, as head -n
	"o": {"offset"},
	"f": {"format"},
	"z": {"compression"},
	"K": {"key-separator"},
}

// TestShortFlagsAreConsistent: a flag of the table has its letter on every
// command, and a letter never stands for two things. Letters outside the
// table are allowed when they mean one flag everywhere.
func TestShortFlagsAreConsistent(t *testing.T) {
	letterOf := map[string]string{}
	for letter, names := range shortFlags {
		for _, n := range names {
			letterOf[n] = letter
		}
	}
	seen := map[string]string{} // letter -> a long name it was seen with
	root := newRoot(&env{stdout: io.Discard, stderr: io.Discard})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden {
				return
			}
			if client := root.PersistentFlags().Lookup(f.Name); client != nil && client != f {
				return // a local flag of another meaning (cluster reassign's --brokers)
			}
			if want, ok := letterOf[f.Name]; ok && f.Shorthand != want {
				t.Errorf("%s --%s: shorthand %q, want -%s", c.CommandPath(), f.Name, f.Shorthand, want)
			}
			if f.Shorthand == "" {
				return
			}
			if names, ok := shortFlags[f.Shorthand]; ok && !slices.Contains(names, f.Name) {
				t.Errorf("%s: -%s is --%s, but -%s stands for %v", c.CommandPath(), f.Shorthand, f.Name, f.Shorthand, names)
			}
			if prev, ok := seen[f.Shorthand]; ok && !ok2(shortFlags[f.Shorthand], prev, f.Name) {
				t.Errorf("%s: -%s is --%s, elsewhere --%s", c.CommandPath(), f.Shorthand, f.Name, prev)
			}
			seen[f.Shorthand] = f.Name
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// ok2 reports whether two long names may share a letter: the same name, or
// both in the letter's table entry.
func ok2(names []string, a, b string) bool {
	return a == b || slices.Contains(names, a) && slices.Contains(names, b)
}

// TestShortFlagsWork: the short forms against a broker (franz-go's kfake):
// topics made with -p, -r and -c (and rpk's --replicas for
// --replication-factor), a record produced with -K and -z, read back with
// -p, -o, -n and -f.
func TestShortFlagsWork(t *testing.T) {
	clearClientEnv(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	if code, _, stderr := runMain("topic", "create", "orders", "-b", addr, "-p", "3", "-r", "1", "-c", "retention.ms=3600000"); code != 0 {
		t.Fatalf("topic create -p -r -c: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runMain("topic", "create", "single", "-b", addr, "-p", "1", "--replicas", "1"); code != 0 {
		t.Fatalf("topic create --replicas: exit %d: %s", code, stderr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	details, err := adm.ListTopics(ctx, "orders", "single")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details["orders"].Partitions); n != 3 {
		t.Errorf("orders has %d partitions, want 3", n)
	}
	if n := len(details["single"].Partitions); n != 1 {
		t.Errorf("single has %d partitions, want 1", n)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := configs.On("orders", nil); err != nil || !slices.ContainsFunc(rc.Configs, func(c kadm.Config) bool {
		return c.Key == "retention.ms" && c.MaybeValue() == "3600000"
	}) {
		t.Errorf("orders' retention.ms was not set by -c: %+v %v", rc, err)
	}

	var out, errOut bytes.Buffer
	if code := Main([]string{"produce", "single", "-b", addr, "-K", ":", "-z", "gzip"}, strings.NewReader("k1:v1\n"), &out, &errOut); code != 0 {
		t.Fatalf("produce -K -z: exit %d: %s", code, errOut.String())
	}
	code, got, stderr := runMain("consume", "single", "-b", addr, "-p", "0", "-o", "0", "-n", "1", "-f", `%p@%o %k=%v\n`)
	if code != 0 || got != "0@0 k1=v1\n" {
		t.Errorf("consume -p -o -n -f: exit %d, stdout %q, stderr %q", code, got, stderr)
	}
}

// TestCompletionOffersTopicsAndGroups: a Tab after a command that takes a
// topic or a group, or after --topic and --group, offers the brokers'
// names that begin with what is typed; unreachable brokers give none, at
// once, with nothing on standard error.
func TestCompletionOffersTopicsAndGroups(t *testing.T) {
	clearClientEnv(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "clicks", "applogs", "ops.metrics"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	for _, g := range []string{"millrace-sink-clicks", "dashboards"} {
		var offsets kadm.Offsets
		offsets.AddOffset("clicks", 0, 0, -1)
		if _, err := adm.CommitOffsets(context.Background(), g, offsets); err != nil {
			t.Fatal(err)
		}
	}
	// check judges one completion's run and returns its candidates.
	check := func(args []string, code int, out, stderr string) []string {
		t.Helper()
		// cobra's own note, which the shell scripts discard; nothing else.
		stderr = regexp.MustCompile(`(?m)^Completion ended with directive: .*\n`).ReplaceAllString(stderr, "")
		if code != 0 || stderr != "" {
			t.Fatalf("complete %v: exit %d, stderr %q", args, code, stderr)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if last := lines[len(lines)-1]; last != ":4" { // ShellCompDirectiveNoFileComp
			t.Errorf("complete %v: directive %q, want :4 (no file names)", args, last)
		}
		return lines[:len(lines)-1]
	}
	complete := func(args ...string) []string {
		t.Helper()
		code, out, stderr := runMain(append([]string{"__complete"}, args...)...)
		return check(args, code, out, stderr)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"consume", "-b", addr, ""}, []string{"applogs", "clicks", "ops.metrics"}},
		{[]string{"topic", "describe", "-b", addr, "c"}, []string{"clicks"}},
		{[]string{"-b", addr, "produce", "o"}, []string{"ops.metrics"}},
		{[]string{"consume", "clicks", "-b", addr, ""}, nil}, // one topic only
		{[]string{"sink", "-b", addr, "--topic", "a"}, []string{"applogs"}},
		{[]string{"group", "reset", "-b", addr, "-t", ""}, []string{"applogs", "clicks", "ops.metrics"}},
		{[]string{"group", "describe", "-b", addr, ""}, []string{"dashboards", "millrace-sink-clicks"}},
		{[]string{"consume", "clicks", "-b", addr, "-g", "m"}, []string{"millrace-sink-clicks"}},
	} {
		got := complete(c.args...)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("complete %v: %q, want %q", c.args, got, c.want)
		}
	}
	// Unreachable brokers: no completions, and the Tab returns (after
	// completionTimeout). The limit is far above that, so only a Tab that
	// waits on dead brokers unbounded fails, never a slow machine.
	type run struct {
		code        int
		out, stderr string
	}
	args := []string{"consume", "-b", "127.0.0.1:1", ""}
	done := make(chan run, 1)
	go func() {
		code, out, stderr := runMain(append([]string{"__complete"}, args...)...)
		done <- run{code, out, stderr}
	}()
	select {
	case r := <-done:
		if got := check(args, r.code, r.out, r.stderr); len(got) != 0 {
			t.Errorf("unreachable brokers: %q", got)
		}
	case <-time.After(completionTimeout + time.Minute):
		t.Fatal("unreachable brokers: the completion does not return")
	}
}

// TestInvocation: printed command lines name the binary as the shell finds
// it: its bare name when PATH leads to this very file, else the path it was
// started by.
func TestInvocation(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "millrace")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "millrace"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spaced := filepath.Join(t.TempDir(), "my tools", "millrace")
	t.Setenv("PATH", dir)
	for arg0, want := range map[string]string{
		bin:            "millrace",
		"millrace":     "millrace",
		"bin/millrace": "bin/millrace",
		spaced:         "'" + spaced + "'",
	} {
		if got := invocation(arg0); got != want {
			t.Errorf("PATH=%s: invocation(%q) = %q, want %q", dir, arg0, got, want)
		}
	}
	t.Setenv("PATH", other) // another millrace comes first
	if got := invocation(bin); got != bin {
		t.Errorf("PATH=%s: invocation(%q) = %q, want the path", other, bin, got)
	}
}

// TestIsTerminal: a file, a pipe or a buffer is no terminal, so `millrace
// up` writing to a log never prints the console's token.
func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]io.Writer{"file": f, "pipe": w, "buffer": &bytes.Buffer{}} {
		if isTerminal(out) {
			t.Errorf("%s is taken for a terminal", name)
		}
	}
}
