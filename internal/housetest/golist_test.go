package housetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the project's module path; imports under it are the project's.
const module = "millrace"

// pkg is what the tests need of one `go list -json` entry, with the module
// prefix cut from every path.
type pkg struct {
	Path        string   // e.g. "broker/log"
	GoFiles     []string // non-test files; none for test-only packages (e2e)
	Imports     []string // project packages the non-test files import
	TestImports []string // project packages the test files import (in-package and _test package)
}

// repoRoot is the module's root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// listPackages runs `go list -json ./...` at the module root.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = repoRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var raw struct {
			ImportPath   string
			GoFiles      []string
			Imports      []string
			TestImports  []string
			XTestImports []string
		}
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		p := pkg{Path: strings.TrimPrefix(raw.ImportPath, module+"/"), GoFiles: raw.GoFiles, Imports: own(raw.Imports)}
		for _, imp := range own(append(raw.TestImports, raw.XTestImports...)) {
			if imp != p.Path {
				p.TestImports = append(p.TestImports, imp)
			}
		}
		slices.Sort(p.TestImports)
		p.TestImports = slices.Compact(p.TestImports)
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

// own keeps the project's packages of imports, without the module prefix.
func own(imports []string) []string {
	var out []string
	for _, imp := range imports {
		if rest, ok := strings.CutPrefix(imp, module+"/"); ok {
			out = append(out, rest)
		}
	}
	return out
}
