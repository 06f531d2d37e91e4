package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSchemaRegistryCLI drives `millrace schema`, `produce --value-schema`
// and `consume --decode` against a broker process's registry: register,
// a refused incompatible version (compat exits 1), a compatible one,
// JSON lines produced as framed Avro and printed back decoded.
func TestSchemaRegistryCLI(t *testing.T) {
	t.Parallel()
	b := startRegistryBroker(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	v1 := write("v1.avsc", `{"type":"record","name":"Click","fields":[{"name":"url","type":"string"},{"name":"n","type":"long"}]}`)
	bad := write("bad.avsc", `{"type":"record","name":"Click","fields":[{"name":"url","type":"string"},{"name":"n","type":"long"},{"name":"ref","type":"string"}]}`)
	v2 := write("v2.avsc", `{"type":"record","name":"Click","fields":[{"name":"url","type":"string"},{"name":"n","type":"long"},{"name":"ref","type":"string","default":""}]}`)
	schema := func(args ...string) (string, string, error) {
		return runErr(30*time.Second, "", millraceBin, append(append([]string{"schema"}, args...), "--registry", b.url)...)
	}

	if out, stderr, err := schema("register", "clicks-value", "--file", v1); err != nil {
		t.Fatalf("schema register: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err := schema("compat", "clicks-value", "--file", bad, "--verbose")
	if err == nil || !strings.Contains(out+stderr, "READER_FIELD_MISSING_DEFAULT_VALUE") {
		t.Errorf("compat of a field without a default: %v, want exit 1 naming READER_FIELD_MISSING_DEFAULT_VALUE\n%s%s", err, out, stderr)
	}
	if out, stderr, err := schema("register", "clicks-value", "--file", v2); err != nil {
		t.Fatalf("schema register v2: %v\n%s%s", err, out, stderr)
	}
	if out, _, err := schema("get", "clicks-value"); err != nil || !strings.Contains(out, `"version": 2`) || !strings.Contains(out, "ref") {
		t.Errorf("schema get: %v\n%s; want version 2 with ref", err, out)
	}
	if out, _, err := schema("list"); err != nil || strings.TrimSpace(out) != "clicks-value" {
		t.Errorf("schema list: %v %q, want clicks-value", err, out)
	}

	run(t, 30*time.Second, "", millraceBin, "topic", "create", "clicks", "-p", "1", "-b", b.addr)
	lines := `{"url":"/a","n":1,"ref":"x"}` + "\n" + `{"url":"/b","n":2,"ref":""}` + "\n"
	if _, stderr, err := runErr(30*time.Second, lines, millraceBin, "produce", "clicks", "--value-schema", "clicks-value",
		"--registry", b.url, "-b", b.addr); err != nil {
		t.Fatalf("produce --value-schema: %v\n%s", err, stderr)
	}
	out = run(t, 30*time.Second, "", millraceBin, "consume", "clicks", "--from-beginning", "--decode", "--max", "2",
		"--registry", b.url, "-b", b.addr)
	got := strings.Fields(out)
	want := []string{`{"n":1,"ref":"x","url":"/a"}`, `{"n":2,"ref":"","url":"/b"}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("consume --decode printed %q, want %q", got, want)
	}
	checkFramed(t, b, "clicks", 2, 2)
}
