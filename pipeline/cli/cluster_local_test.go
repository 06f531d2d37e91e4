package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cluster restart fails with one line, before touching anything, when the
// directory holds no cluster or not that broker, and for an ID that is no
// number.
func TestClusterRestartErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cluster", "restart", "1", "--dir", dir}, 1, "no local cluster at " + dir},
		{[]string{"cluster", "restart", "x", "--dir", dir}, 2, `broker "x" is not a broker ID`},
		{[]string{"cluster", "restart", "1", "--dir", dir, "-b", "127.0.0.1:9092"}, 2, "unknown flag"},
	} {
		var out, errOut strings.Builder
		if code := Main(tc.args, strings.NewReader(""), &out, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut.String(), tc.code, tc.want)
		}
	}
	state := "CLUSTER_DIR=" + dir + "\nBROKER_PID_1=10\nBROKER_PORT_1=9\nBROKER_CMD_1=\"millrace broker --id 1\"\nBROKERS=1\n"
	if err := os.WriteFile(filepath.Join(dir, "state"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if code := Main([]string{"cluster", "restart", "2", "--dir", dir}, strings.NewReader(""), &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "has no broker 2 (the cluster has 1)") || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("restart of a broker the cluster lacks: exit %d, stderr %q", code, errOut.String())
	}
}

// setClusterState replaces one line and keeps the others, or adds the key.
func TestSetClusterState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(path, []byte("A=1\nBROKER_PID_1=10\nB=\"x y\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := setClusterState(path, "BROKER_PID_1", "42"); err != nil {
		t.Fatal(err)
	}
	if err := setClusterState(path, "BROKER_PID_2", "43"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := "A=1\nBROKER_PID_1=42\nB=\"x y\"\nBROKER_PID_2=43\n"; string(b) != want {
		t.Fatalf("state %q, want %q", b, want)
	}
	state, err := readClusterState(path)
	if err != nil || state["B"] != `"x y"` || state["BROKER_PID_2"] != "43" {
		t.Fatalf("read back %v, %v", state, err)
	}
}
