package cli

import (
	"os"
	"os/signal"
	"syscall"
)

// stopUntilContinued stops the process with SIGSTOP, as a long pause would,
// and returns only once it has been continued (SIGCONT). Sending SIGSTOP to
// one's own process does not stop the sending thread on the spot: the kernel
// hands a process-wide signal to one of the process's threads, often another
// one, and the sender runs on until that thread has stopped the group. On a
// busy machine that took long enough for the worker to check its group
// generation (still current) and start publishing, so the pause fell after
// the check instead of before it, and the resumed worker published.
func stopUntilContinued() error {
	continued := make(chan os.Signal, 1)
	signal.Notify(continued, syscall.SIGCONT)
	defer signal.Stop(continued)
	return pauseUntil(func() error { return syscall.Kill(os.Getpid(), syscall.SIGSTOP) }, continued)
}

// pauseUntil runs stop and then waits for continued, whether or not the
// pause has begun by the time stop returns.
func pauseUntil(stop func() error, continued <-chan os.Signal) error {
	if err := stop(); err != nil {
		return err
	}
	<-continued
	return nil
}
