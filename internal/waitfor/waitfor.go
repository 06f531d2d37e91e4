// Package waitfor is the tests' one way to wait: poll a condition until it
// holds, or fail the test after a limit, naming what was awaited. Tests
// wait for conditions, never for a fixed time, and never assert how long
// something took.
package waitfor

import (
	"testing"
	"time"
)

// maxPoll is the longest pause between two looks at the condition: short
// next to any limit, long enough that a condition asking a broker does not
// load it.
const maxPoll = 50 * time.Millisecond

// Until polls cond until it holds, or fails tb after limit with what. The
// first looks come quickly (a condition that holds soon costs little
// waiting), later ones every maxPoll.
func Until(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPoll)
	}
}
