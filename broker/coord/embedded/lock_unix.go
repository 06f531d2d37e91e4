//go:build unix

package embedded

import (
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive, non-blocking flock on path so a second process
// (or a second Server in this one) cannot open the same store and interleave
// writes. The lock dies with the file descriptor, so a crash never leaves it.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("already in use by another server: %w", err)
	}
	return f, nil
}
