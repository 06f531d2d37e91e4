package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"millrace/internal/clientauth"
)

// parseClient runs args through the real command tree with one more
// command, probe, that records its positional arguments; it returns the
// parsed client flags.
func parseClient(t *testing.T, args ...string) (*clientFlags, []string, error) {
	t.Helper()
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	root := newRoot(e)
	var positional []string
	root.AddCommand(&cobra.Command{Use: "probe", Args: anyArgs, RunE: func(_ *cobra.Command, args []string) error {
		positional = args
		return nil
	}})
	root.SetArgs(args)
	return e.client, positional, root.Execute()
}

// clearClientEnv unsets every client variable for the test, so the
// machine's environment does not leak in.
func clearClientEnv(t *testing.T) {
	for _, name := range []string{"brokers", "tls", "tls-ca", "tls-cert", "tls-key", "tls-server-name", "sasl-mechanism", "sasl-username", "sasl-password-file"} {
		t.Setenv(envName(name), "")
	}
	t.Setenv(passwordEnv, "")
}

func TestClientFlagsOnTheCommandLine(t *testing.T) {
	clearClientEnv(t)
	for _, c := range []struct {
		name       string
		args       []string
		seeds      []string
		positional []string
		want       clientauth.Settings
	}{
		{"none", []string{"probe"}, []string{defaultBrokers}, nil, clientauth.Settings{}},
		{"shorthand, spaced values, between positionals",
			[]string{"probe", "a", "-b", "x:1,y:2", "b", "--tls-ca", "/ca.pem", "--sasl-mechanism", "scram-sha-512", "--sasl-username", "u", "--sasl-password-file", "/pw"},
			[]string{"x:1", "y:2"}, []string{"a", "b"},
			clientauth.Settings{TLS: &clientauth.TLS{CA: "/ca.pem"}, SASL: &clientauth.SASL{Mechanism: "SCRAM-SHA-512", Username: "u", PasswordFile: "/pw"}}},
		{"--flag=value and -bVALUE, before the command",
			[]string{"-bz:3", "--tls-server-name=kafka.internal", "--tls-cert=/c.pem", "probe"},
			[]string{"z:3"}, nil,
			clientauth.Settings{TLS: &clientauth.TLS{Cert: "/c.pem", ServerName: "kafka.internal"}}},
		{"--tls alone: system roots", []string{"probe", "--tls"}, []string{defaultBrokers}, nil, clientauth.Settings{TLS: &clientauth.TLS{}}},
	} {
		flags, positional, err := parseClient(t, c.args...)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got, err := flags.settings()
		if err != nil {
			t.Errorf("%s: settings: %v", c.name, err)
			continue
		}
		if !slices.Equal(flags.seeds(), c.seeds) || !slices.Equal(positional, c.positional) || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: seeds %v positional %q settings %+v %+v; want %v %q %+v %+v", c.name, flags.seeds(), positional,
				got.TLS, got.SASL, c.seeds, c.positional, c.want.TLS, c.want.SASL)
		}
	}
}

func TestClientFlagsFromTheEnvironment(t *testing.T) {
	clearClientEnv(t)
	t.Setenv("MILLRACE_BROKERS", "a:1,b:2")
	t.Setenv("MILLRACE_TLS_CA", "/env-ca.pem")
	t.Setenv("MILLRACE_SASL_MECHANISM", "PLAIN")
	t.Setenv("MILLRACE_SASL_USERNAME", "env-user")
	t.Setenv(passwordEnv, "secret")
	flags, _, err := parseClient(t, "probe")
	if err != nil {
		t.Fatal(err)
	}
	got, err := flags.settings()
	if err != nil {
		t.Fatal(err)
	}
	want := clientauth.Settings{TLS: &clientauth.TLS{CA: "/env-ca.pem"}, SASL: &clientauth.SASL{Mechanism: "PLAIN", Username: "env-user", Password: "secret"}}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(flags.seeds(), []string{"a:1", "b:2"}) || flags.brokersGiven() {
		t.Fatalf("from the environment: seeds %v (given %v) %+v %+v", flags.seeds(), flags.brokersGiven(), got.TLS, got.SASL)
	}

	// The command line wins over the environment.
	flags, _, err = parseClient(t, "probe", "--brokers=c:3", "--tls-ca", "/flag-ca.pem", "--sasl-username", "flag-user")
	if err != nil {
		t.Fatal(err)
	}
	if got, err = flags.settings(); err != nil {
		t.Fatal(err)
	}
	if got.TLS.CA != "/flag-ca.pem" || got.SASL.Username != "flag-user" || got.SASL.Password != "secret" ||
		!reflect.DeepEqual(flags.seeds(), []string{"c:3"}) || !flags.brokersGiven() {
		t.Fatalf("flags over the environment: seeds %v %+v %+v", flags.seeds(), got.TLS, got.SASL)
	}

	// A value that does not parse is a usage error of any command.
	t.Setenv("MILLRACE_TLS", "maybe")
	var out, errOut bytes.Buffer
	if code := Main([]string{"topic", "list"}, strings.NewReader(""), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `MILLRACE_TLS="maybe"`) {
		t.Fatalf("MILLRACE_TLS=maybe: exit %d, stderr %q", code, errOut.String())
	}
}

func TestClientFlagsRejectIncompleteSASL(t *testing.T) {
	clearClientEnv(t)
	if fs, _, _ := parseClient(t, "probe"); fs.fs.Lookup("sasl-password") != nil {
		t.Fatal("a password flag exists: the password would show in ps")
	}
	for _, c := range []struct {
		name string
		args []string
		env  string // the password variable
		want string
	}{
		{"no password", []string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u"}, "", "needs a password"},
		{"two passwords", []string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file", "/pw"}, "p", "given twice"},
		{"no mechanism", []string{"--sasl-username", "u"}, "p", "need --sasl-mechanism"},
		{"unknown mechanism", []string{"--sasl-mechanism", "GSSAPI", "--sasl-username", "u"}, "p", `"GSSAPI" is not one of`},
		{"no user", []string{"--sasl-mechanism", "PLAIN"}, "p", "username is empty"},
		{"key without cert", []string{"--tls-key", "/k.pem"}, "", "key is set without cert"},
	} {
		t.Setenv(passwordEnv, c.env)
		flags, _, err := parseClient(t, append([]string{"probe"}, c.args...)...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err = flags.settings()
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want a usage error with %q", c.name, err, c.want)
		}
	}
}

// A section given on the command line replaces the --config file's; one
// from the environment only fills a section the file leaves out.
func TestClientFlagsApplyToAComponent(t *testing.T) {
	clearClientEnv(t)
	file := func() clientauth.Settings {
		return clientauth.Settings{TLS: &clientauth.TLS{CA: "/file-ca.pem"}}
	}
	t.Setenv("MILLRACE_TLS_CA", "/env-ca.pem")
	t.Setenv("MILLRACE_SASL_MECHANISM", "SCRAM-SHA-256")
	t.Setenv("MILLRACE_SASL_USERNAME", "env-user")
	t.Setenv(passwordEnv, "secret")
	flags, _, err := parseClient(t, "probe")
	if err != nil {
		t.Fatal(err)
	}
	got := file()
	if err := flags.applyTo(&got); err != nil {
		t.Fatal(err)
	}
	if got.TLS.CA != "/file-ca.pem" || got.SASL == nil || got.SASL.Username != "env-user" {
		t.Fatalf("environment: %+v %+v; want the file's TLS and the environment's SASL", got.TLS, got.SASL)
	}
	if flags, _, err = parseClient(t, "probe", "--tls-ca", "/flag-ca.pem"); err != nil {
		t.Fatal(err)
	}
	got = file()
	if err := flags.applyTo(&got); err != nil {
		t.Fatal(err)
	}
	if got.TLS.CA != "/flag-ca.pem" {
		t.Fatalf("command line: TLS %+v; want the flag's CA", got.TLS)
	}
}

// The replacement of the hand-rolled layer keeps its behaviour: positional
// arguments between flags, repeated and --flag=value flags, a count check.
func TestFlagsAcceptPositionalBetweenFlagsInTheTree(t *testing.T) {
	clearClientEnv(t)
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	root := newRoot(e)
	create, _, err := root.Find([]string{"topic", "create"})
	if err != nil || create.Name() != "create" {
		t.Fatalf("topic create not found: %v", err)
	}
	var positional []string
	create.RunE = func(_ *cobra.Command, args []string) error { positional = args; return nil }
	root.SetArgs([]string{"topic", "create", "--partitions", "6", "orders", "--config", "retention.ms=1000", "--config=segment.bytes=2048"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	parts, _ := create.Flags().GetInt("partitions")
	cfg := create.Flags().Lookup("config").Value.(keyValues)
	if !reflect.DeepEqual(positional, []string{"orders"}) || parts != 6 || cfg["retention.ms"] != "1000" || cfg["segment.bytes"] != "2048" {
		t.Fatalf("positional %v partitions %d config %v", positional, parts, cfg)
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"topic", "create", "a", "b"}, strings.NewReader(""), &out, &errOut); code != 2 ||
		!strings.HasPrefix(errOut.String(), "millrace topic create: expected 1 argument(s), got 2\nusage: millrace topic create NAME") {
		t.Fatalf("two positionals: exit %d, stderr %q", code, errOut.String())
	}
	if err := (keyValues{}).Set("novalue"); err == nil {
		t.Fatal("config without '=' accepted")
	}
}

func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_millrace", "zsh": "#compdef millrace", "fish": "complete -c millrace"} {
		var out, errOut bytes.Buffer
		if code := Main([]string{"completion", shell}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("completion %s: exit %d, %d bytes without %q; stderr %q", shell, code, out.Len(), want, errOut.String())
		}
	}
	// The scripts ask the binary: subcommands and flags complete.
	var out, errOut bytes.Buffer
	if code := Main([]string{"__complete", "topic", ""}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(out.String(), "create\t") {
		t.Errorf("__complete topic: exit %d:\n%s", code, out.String())
	}
	out.Reset()
	if code := Main([]string{"__complete", "consume", "--from"}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(out.String(), "--from-beginning") {
		t.Errorf("__complete consume --from: exit %d:\n%s", code, out.String())
	}
	errOut.Reset()
	if code := Main([]string{"completion", "powershell7"}, strings.NewReader(""), &out, &errOut); code != 2 {
		t.Errorf("completion for an unknown shell: exit %d, stderr %q", code, errOut.String())
	}
}

func TestHelpAndCommandsWithoutClients(t *testing.T) {
	clearClientEnv(t)
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Main(args, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		code, _, help := run(args...)
		if code != 0 || !strings.Contains(help, "\n  topic create      create a topic\n") || !strings.Contains(help, "\n  completion        print the shell completion script\n") ||
			!strings.Contains(help, "  --tls-ca file\n") || !strings.Contains(help, passwordEnv) {
			t.Errorf("millrace %v: exit %d:\n%s", args, code, help)
		}
	}
	if code, _, help := run(); code != 2 || !strings.HasPrefix(help, "usage: millrace <command>") {
		t.Errorf("no command: exit %d:\n%s", code, help)
	}
	if code, _, stderr := run("topic"); code != 2 || !strings.HasPrefix(stderr, `millrace topic: missing command after "topic"`) {
		t.Errorf("topic alone: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := run("topic", "nosuch"); code != 2 || stderr != "millrace: unknown command \"topic nosuch\" (try: "+invocation(os.Args[0])+" help)\n" {
		t.Errorf("topic nosuch: exit %d, stderr %q", code, stderr)
	}
	// Go's flag package took -name for --name; pflag reads one-letter flags,
	// and the error says how to write the long one, whether pflag failed
	// (-p artitions is no number) or would have read a wrong value in
	// silence (-t opic), or the letter is no flag at all.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"topic", "create", "x", "-partitions", "3"}, "millrace topic create: -partitions: long flags take two dashes: --partitions\n"},
		{[]string{"-tls-ca=x", "topic", "list"}, "millrace topic list: -tls-ca=x: long flags take two dashes: --tls-ca=x\n"},
		{[]string{"group", "reset", "g", "-topic", "t", "--to-earliest"}, "millrace group reset: -topic: long flags take two dashes: --topic\n"},
		{[]string{"topic", "list", "-x"}, "millrace topic list: unknown shorthand flag: 'x' in -x\n"},
		{[]string{"topic", "list", "-xyz"}, "millrace topic list: unknown shorthand flag: 'x' in -xyz (long flags take two dashes: --xyz)\n"},
	} {
		if code, _, stderr := run(c.args...); code != 2 || !strings.HasPrefix(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
	// A command that makes no client neither lists nor takes the client flags.
	if code, _, help := run("broker", "--help"); code != 0 || strings.Contains(help, "--tls") || !strings.Contains(help, "  --data string\n") ||
		strings.Contains(help, "hold-unsynced-writes") {
		t.Errorf("broker --help: exit %d:\n%s", code, help)
	}
	if code, _, stderr := run("version", "--tls"); code != 2 || !strings.HasPrefix(stderr, "millrace version: unknown flag: --tls") {
		t.Errorf("version --tls: exit %d, stderr %q", code, stderr)
	}
	if code, stdout, _ := run("version"); code != 0 || stdout != "millrace "+Version+"\n" {
		t.Errorf("version: exit %d, stdout %q", code, stdout)
	}
	// cluster reassign's --brokers are broker IDs: the client flag's
	// description stays out of its help.
	if code, _, help := run("cluster", "reassign", "-h"); code != 0 || !strings.Contains(help, "target broker IDs") || strings.Contains(help, "seed brokers") {
		t.Errorf("cluster reassign -h: exit %d:\n%s", code, help)
	}
	if code, _, help := run("topic", "list", "--help"); code != 0 || !strings.Contains(help, "client flags") || !strings.Contains(help, "  --sasl-mechanism string\n") {
		t.Errorf("topic list --help: exit %d:\n%s", code, help)
	}
}
