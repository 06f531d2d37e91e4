package audit

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"millrace/internal/durable"
)

// instanceFileName holds an agent's audit instance id in its data dir.
const instanceFileName = "audit-instance-id"

// InstanceID returns the audit instance id kept in dir, making and storing
// a random one the first time. A stable id makes a restarted agent's
// records replace its earlier ones (same keys) instead of adding to them.
func InstanceID(dir string) (string, error) {
	path := filepath.Join(dir, instanceFileName)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if id == "" || strings.Contains(id, "/") {
			return "", fmt.Errorf("audit: %s holds no valid instance id; delete it to make a new one", path)
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("audit: reading instance id: %w", err)
	}
	var r [8]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (Go 1.24+)
	id := hex.EncodeToString(r[:])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("audit: instance id: %w", err)
	}
	if err := durable.WriteFile(path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("audit: storing instance id: %w", err)
	}
	return id, nil
}
