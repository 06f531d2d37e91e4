package cli

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// TestPauseUntilWaitsForContinue: the stop hook returns only after the
// continue signal, even when the stop itself has not taken effect when the
// kill returns (here: a stop that only queues the continue).
func TestPauseUntilWaitsForContinue(t *testing.T) {
	continued := make(chan os.Signal, 1)
	stopped := false
	err := pauseUntil(func() error {
		stopped = true
		continued <- syscall.SIGCONT // delivered once the process runs again
		return nil
	}, continued)
	if err != nil || !stopped {
		t.Fatalf("pauseUntil = %v, stop ran: %v", err, stopped)
	}
	if len(continued) != 0 {
		t.Fatal("pauseUntil returned before the continue signal arrived")
	}
}

// TestPauseUntilStopFails: a failed stop is reported at once instead of
// waiting for a continue that never comes.
func TestPauseUntilStopFails(t *testing.T) {
	want := errors.New("no permission")
	if err := pauseUntil(func() error { return want }, make(chan os.Signal)); !errors.Is(err, want) {
		t.Fatalf("pauseUntil = %v, want %v", err, want)
	}
}
