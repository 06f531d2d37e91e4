// Package leaktest checks that a test binary leaves no goroutine of its own
// running, for packages whose tests run against franz-go's kfake cluster.
package leaktest

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyTestMain runs the tests and fails the binary if goroutines remain.
// kfake's Close returns before its run loop has exited, and a loop resuming a
// slept control can still be waiting for its lock when goleak looks; that
// goroutine belongs to the fake, so it alone is ignored.
func VerifyTestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"))
}
