// Package lazyfree runs a process with the Go runtime handing freed heap
// pages back to the kernel lazily (MADV_FREE) rather than at once
// (MADV_DONTNEED, the runtime's default on Linux).
//
// A sink's heap swings by tens of megabytes from one Parquet file to the
// next, and the runtime returns the pages above its target after every swing.
// With MADV_DONTNEED each returned page is faulted in again (and zeroed by the
// kernel) when the heap grows back; with MADV_FREE the kernel only takes the
// pages when it needs memory, so they are mostly still there. On the
// project's machines this cut the sink's page faults from about 4,700 to a few
// hundred per 200,000 events and its CPU per event by 7-12% (docs/benchmarks.md,
// Sinks). The price is in accounting only: freed pages count in
// the process's RSS until the kernel reclaims them.
//
// The setting is read once, at start-up, from GODEBUG (go.mod's godebug
// lines and //go:debug accept only the settings the go command lists, and
// madvdontneed is not one of them), so the process re-executes itself.
package lazyfree

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
)

// setting is the GODEBUG entry that selects MADV_FREE.
const setting = "madvdontneed=0"

// Reexec replaces the process with a fresh run of its own executable, with
// the same arguments and GODEBUG=madvdontneed=0 added to its environment. It
// returns nil without doing anything when GODEBUG already sets madvdontneed
// (to either value: an operator's choice stands) or on systems other than
// Linux; otherwise it returns only if the re-execution failed, and the
// process goes on with the runtime's default.
func Reexec() error {
	env, ok := withSetting(os.Environ())
	if !ok || runtime.GOOS != "linux" {
		return nil
	}
	// /proc/self/exe is the very file this process runs, even if its path
	// has since been replaced (an upgrade in place) or removed.
	if err := syscall.Exec("/proc/self/exe", os.Args, env); err != nil {
		return fmt.Errorf("lazyfree: re-execute self: %w", err)
	}
	return nil // not reached: Exec does not return on success
}

// withSetting returns environ with madvdontneed=0 added to GODEBUG, and
// false if GODEBUG already sets madvdontneed.
func withSetting(environ []string) ([]string, bool) {
	out := make([]string, 0, len(environ)+1)
	debug := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			debug = v
			continue
		}
		out = append(out, kv)
	}
	for _, s := range strings.Split(debug, ",") {
		if strings.HasPrefix(s, "madvdontneed=") {
			return environ, false
		}
	}
	if debug != "" {
		debug += ","
	}
	return append(out, "GODEBUG="+debug+setting), true
}
