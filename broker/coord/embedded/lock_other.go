//go:build !unix

package embedded

import "os"

// lockDir opens the lock file; without flock the directory is not protected
// against a second server.
func lockDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
}
