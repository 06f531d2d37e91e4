package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"millrace/schemas/srclient/srtest"
)

// runWithStdin runs the command line in-process with stdin and returns
// its exit code, standard output and standard error.
func runWithStdin(stdin string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

const (
	cliAvroV1 = `{"type":"record","name":"Click","namespace":"shop","fields":[{"name":"url","type":"string"},{"name":"n","type":"long"}]}`
	// v2 adds a field with a default: BACKWARD compatible.
	cliAvroV2 = `{"type":"record","name":"Click","namespace":"shop","fields":[{"name":"url","type":"string"},{"name":"n","type":"long"},{"name":"ref","type":"string","default":""}]}`
	// bad adds a field without a default: not BACKWARD compatible
	// (Confluent's READER_FIELD_MISSING_DEFAULT_VALUE).
	cliAvroBad = `{"type":"record","name":"Click","namespace":"shop","fields":[{"name":"url","type":"string"},{"name":"n","type":"long"},{"name":"x","type":"int"}]}`
)

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// mustRun runs a command that must succeed and returns its stdout.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, stderr := runMain(args...)
	if code != 0 {
		t.Fatalf("%s: exit %d: %s%s", strings.Join(args, " "), code, out, stderr)
	}
	return out
}

// TestSchemaCommands walks a subject's life through the schema commands:
// register, get (by subject and by ID), list, compat (both answers, the
// incompatible one exiting 1 with the reason), config, mode, and delete
// (soft, then permanent).
func TestSchemaCommands(t *testing.T) {
	t.Parallel()
	reg := srtest.Start(t)
	r := "--registry=" + reg.URL
	v1, v2, bad := writeFile(t, "v1.avsc", cliAvroV1), writeFile(t, "v2.avsc", cliAvroV2), writeFile(t, "bad.avsc", cliAvroBad)

	if out := mustRun(t, "schema", "register", "clicks-value", "--file", v1, r); out != "subject clicks-value version 1 id 1\n" {
		t.Errorf("register: %q", out)
	}
	var got shownSchema
	if err := json.Unmarshal([]byte(mustRun(t, "schema", "get", "clicks-value", r)), &got); err != nil ||
		got.Version != 1 || got.ID != 1 || got.SchemaType != "AVRO" || got.Schema == "" {
		t.Errorf("get: %+v, %v", got, err)
	}
	if out := mustRun(t, "schema", "get", "--id", "1", r); !strings.Contains(out, `"schemaType": "AVRO"`) || strings.Contains(out, `"subject"`) {
		t.Errorf("get --id: %s", out)
	}
	if out := mustRun(t, "schema", "compat", "clicks-value", "--file", v2, r); out != "compatible\n" {
		t.Errorf("compat v2: %q", out)
	}
	code, out, stderr := runMain("schema", "compat", "clicks-value", "--file", bad, "--verbose", r)
	if code != 1 || !strings.HasPrefix(out, "not compatible\n") || !strings.Contains(out, "READER_FIELD_MISSING_DEFAULT_VALUE") ||
		!strings.Contains(stderr, "not compatible with clicks-value version latest") {
		t.Errorf("compat bad: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	mustRun(t, "schema", "register", "clicks-value", "--file", v2, r)
	mustRun(t, "schema", "register", "orders-value", "--file", v1, r)
	if out := mustRun(t, "schema", "list", "--prefix", "click", r); out != "clicks-value\n" {
		t.Errorf("list --prefix: %q", out)
	}
	if out := mustRun(t, "schema", "config", r); out != "BACKWARD\n" {
		t.Errorf("config: %q", out)
	}
	if out := mustRun(t, "schema", "config", "orders-value", "--set", "full", r); out != "FULL\n" {
		t.Errorf("config --set: %q", out)
	}
	if out := mustRun(t, "schema", "config", "orders-value", r); out != "FULL\n" {
		t.Errorf("config of a subject: %q", out)
	}
	if out := mustRun(t, "schema", "mode", "--set", "READONLY", r); out != "READONLY\n" {
		t.Errorf("mode --set: %q", out)
	}
	if code, _, stderr := runMain("schema", "register", "other", "--file", v1, r); code != 1 || strings.Count(stderr, "\n") != 1 {
		t.Errorf("register in READONLY: exit %d, stderr %q", code, stderr)
	}
	mustRun(t, "schema", "mode", "--set", "READWRITE", r)
	if out := mustRun(t, "schema", "delete", "clicks-value", "--version", "2", r); out != "soft-deleted clicks-value version 2\n" {
		t.Errorf("delete --version: %q", out)
	}
	if out := mustRun(t, "schema", "delete", "orders-value", r); out != "soft-deleted orders-value versions [1]\n" {
		t.Errorf("delete: %q", out)
	}
	if out := mustRun(t, "schema", "list", r); out != "clicks-value\n" {
		t.Errorf("list after delete: %q", out)
	}
	if out := mustRun(t, "schema", "list", "--deleted", r); out != "clicks-value\norders-value\n" {
		t.Errorf("list --deleted: %q", out)
	}
	if out := mustRun(t, "schema", "delete", "orders-value", "--permanent", r); out != "permanently deleted orders-value versions [1]\n" {
		t.Errorf("delete --permanent: %q", out)
	}
	for _, args := range [][]string{
		{"schema", "get", r},
		{"schema", "get", "x", "--id", "1", r},
		{"schema", "register", "x", r},
		{"schema", "register", "x", "--file", v1, "--type", "XML", r},
		{"schema", "register", "x", "--file", v1, "--reference", "a=b", r},
		{"schema", "config", "--set", "SIDEWAYS", r},
		{"schema", "get", "x", "--version", "0", r},
		{"schema", "list", "-b", "127.0.0.1:9092", r},
	} {
		if code, _, _ := runMain(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
	}
}

// TestSchemaRegisterWithReferences: --reference names a schema by
// name=subject:version, and the registry resolves it.
func TestSchemaRegisterWithReferences(t *testing.T) {
	t.Parallel()
	reg := srtest.Start(t)
	r := "--registry=" + reg.URL
	money := writeFile(t, "money.avsc", `{"type":"record","name":"Money","namespace":"shop","fields":[{"name":"cents","type":"long"}]}`)
	order := writeFile(t, "order.avsc", `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"price","type":"shop.Money"}]}`)
	mustRun(t, "schema", "register", "money", "--file", money, r)
	if out := mustRun(t, "schema", "register", "orders-value", "--file", order, "--reference", "shop.Money=money:1", r); out != "subject orders-value version 1 id 2\n" {
		t.Errorf("register with a reference: %q", out)
	}
	if out := mustRun(t, "schema", "get", "orders-value", r); !strings.Contains(out, `"subject": "money"`) {
		t.Errorf("get shows no reference: %s", out)
	}
}

// TestSchemaImport copies a registry into another, IDs and versions kept
// (a reference included), and leaves the target's mode as it was.
func TestSchemaImport(t *testing.T) {
	t.Parallel()
	source, target := srtest.Start(t), srtest.Start(t)
	src := "--registry=" + source.URL
	money := writeFile(t, "money.avsc", `{"type":"record","name":"Money","namespace":"shop","fields":[{"name":"cents","type":"long"}]}`)
	order := writeFile(t, "order.avsc", `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"price","type":"shop.Money"}]}`)
	mustRun(t, "schema", "register", "clicks-value", "--file", writeFile(t, "v1.avsc", cliAvroV1), src)
	mustRun(t, "schema", "register", "clicks-value", "--file", writeFile(t, "v2.avsc", cliAvroV2), src)
	mustRun(t, "schema", "register", "money", "--file", money, src)
	mustRun(t, "schema", "register", "orders-value", "--file", order, "--reference", "shop.Money=money:1", src)

	dst := "--registry=" + target.URL
	if out := mustRun(t, "schema", "import", "--from", source.URL, dst); out != "imported 4 schema versions from "+source.URL+"\n" {
		t.Errorf("import: %q", out)
	}
	for _, args := range [][]string{{"get", "--id", "4"}, {"get", "clicks-value", "--version", "2"}, {"get", "orders-value"}} {
		want := mustRun(t, append(append([]string{"schema"}, args...), src)...)
		if got := mustRun(t, append(append([]string{"schema"}, args...), dst)...); got != want {
			t.Errorf("schema %v: target answers\n%s\nsource answers\n%s", args, got, want)
		}
	}
	if out := mustRun(t, "schema", "mode", dst); out != "READWRITE\n" {
		t.Errorf("target mode after import: %q", out)
	}
	// A second import meets schemas: IMPORT mode is refused without --force.
	if code, _, stderr := runMain("schema", "import", "--from", source.URL, dst); code != 1 || !strings.Contains(stderr, "IMPORT") {
		t.Errorf("import into a registry with schemas: exit %d, %q", code, stderr)
	}
}

// TestProduceAndConsumeWithSchemas: produce --value-schema encodes JSON
// lines with the subject's latest schema and frames them; consume --decode
// prints them back as JSON, and prints a value that is not framed as it
// is, with a note on stderr. A line that does not fit the schema stops
// produce with its line number.
func TestProduceAndConsumeWithSchemas(t *testing.T) {
	clearClientEnv(t)
	reg := srtest.Start(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "clicks"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	b, r := "-b"+cluster.ListenAddrs()[0], "--registry="+reg.URL
	mustRun(t, "schema", "register", "clicks-value", "--file", writeFile(t, "v1.avsc", cliAvroV1), r)

	if code, _, stderr := runWithStdin("{\"url\":\"/a\",\"n\":1}\n{\"url\":\"/b\",\"n\":9007199254740993}\n", "produce", "clicks", "--value-schema", "clicks-value", b, r); code != 0 {
		t.Fatalf("produce --value-schema: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runWithStdin("plain text\n", "produce", "clicks", b); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, stderr)
	}
	code, out, stderr := runMain("consume", "clicks", "--from-beginning", "-n", "3", "--decode", b, r)
	if want := "{\"n\":1,\"url\":\"/a\"}\n{\"n\":9007199254740993,\"url\":\"/b\"}\nplain text\n"; code != 0 || out != want {
		t.Errorf("consume --decode: exit %d, stdout %q, want %q; stderr %q", code, out, want, stderr)
	}
	if !strings.Contains(stderr, "clicks/0 offset 2 printed as it is") {
		t.Errorf("no note for the plain value: %q", stderr)
	}
	code, _, stderr = runWithStdin("{\"url\":\"/a\",\"n\":1}\n{\"url\":3}\n", "produce", "clicks", "--value-schema", "clicks-value", b, r)
	if code != 1 || !strings.Contains(stderr, "line 2 does not fit clicks-value version 1") {
		t.Errorf("a line that does not fit: exit %d, %q", code, stderr)
	}
	// The line before the one that does not fit was sent.
	if code, out, _ := runMain("consume", "clicks", "--from-beginning", "-e", "--decode", b, r); code != 0 || strings.Count(out, "\n") != 4 {
		t.Errorf("after a line that does not fit: exit %d, %q; want the line before it sent", code, out)
	}
	if code, _, stderr := runWithStdin("{}\n", "produce", "clicks", "--value-schema", "nosuch-value", b, r); code != 1 || !strings.Contains(stderr, "nosuch-value") {
		t.Errorf("unknown subject: exit %d, %q", code, stderr)
	}
}

// TestSchemaRegistryFromTheEnvironment: MILLRACE_SCHEMA_REGISTRY is
// --registry's default, and MILLRACE_SCHEMA_REGISTRY_PASSWORD the
// password of --registry-user.
func TestSchemaRegistryFromTheEnvironment(t *testing.T) {
	reg := srtest.Start(t, srtest.BasicAuth("ops", "s3cret"))
	t.Setenv(registryEnv, reg.URL)
	t.Setenv(registryPasswordEnv, "s3cret")
	mustRun(t, "schema", "register", "clicks-value", "--file", writeFile(t, "v1.avsc", cliAvroV1), "--registry-user", "ops")
	if out := mustRun(t, "schema", "list", "--registry-user", "ops"); out != "clicks-value\n" {
		t.Errorf("list: %q", out)
	}
	t.Setenv(registryPasswordEnv, "wrong")
	if code, _, stderr := runMain("schema", "list", "--registry-user", "ops"); code != 1 || strings.Count(stderr, "\n") != 1 {
		t.Errorf("wrong password: exit %d, %q", code, stderr)
	}
}

// TestSchemaRegistryOverTLS: --registry-ca verifies an https registry.
func TestSchemaRegistryOverTLS(t *testing.T) {
	t.Parallel()
	reg := srtest.Start(t, srtest.TLS())
	mustRun(t, "schema", "register", "clicks-value", "--file", writeFile(t, "v1.avsc", cliAvroV1), "--registry", reg.URL, "--registry-ca", reg.CAFile)
	if code, _, stderr := runMain("schema", "list", "--registry", reg.URL); code != 1 || !strings.Contains(stderr, "certificate") {
		t.Errorf("without --registry-ca: exit %d, %q", code, stderr)
	}
}
