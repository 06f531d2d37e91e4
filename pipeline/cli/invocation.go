package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// invocation is how to run this binary again from the same shell, for the
// command lines millrace prints (the client line of `millrace up` under
// security: on, "try: ... help"): its bare name when the shell finds this
// very binary on PATH, else the path it was started by (bin/millrace after
// make build, as typed, quoted for the shell). A printed "millrace ..." that the shell cannot
// find is the first thing a newcomer copies.
func invocation(arg0 string) string {
	if arg0 == "" {
		return "millrace"
	}
	if !strings.Contains(arg0, "/") {
		return arg0 // the shell found it on PATH
	}
	name := filepath.Base(arg0)
	if onPath, err := exec.LookPath(name); err == nil && sameFile(onPath, arg0) {
		return name
	}
	return shellQuote(arg0)
}

func sameFile(a, b string) bool {
	ia, err := os.Stat(a)
	if err != nil {
		return false
	}
	ib, err := os.Stat(b)
	return err == nil && os.SameFile(ia, ib)
}
