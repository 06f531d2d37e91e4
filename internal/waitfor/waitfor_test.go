package waitfor

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestUntilReturnsOnceTheConditionHolds: cond is asked until it holds.
func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var asked atomic.Int32
	Until(t, time.Minute, "the third look", func() bool { return asked.Add(1) == 3 })
	if n := asked.Load(); n != 3 {
		t.Fatalf("cond asked %d times, want 3", n)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records instead of stopping.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

// Fatalf records the message and stops the caller, as the real one would.
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

// TestUntilFailsAfterTheLimit: a condition that never holds fails the test
// naming what was awaited.
func TestUntilFailsAfterTheLimit(t *testing.T) {
	r := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("Until did not fail the test: %v", p)
			}
		}()
		Until(r, 20*time.Millisecond, "never", func() bool { return false })
	}()
	if !strings.HasPrefix(r.msg, "never: not within") {
		t.Fatalf("failure message %q does not name what was awaited", r.msg)
	}
}
