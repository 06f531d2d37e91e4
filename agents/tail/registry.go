package tail

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"millrace/internal/durable"
)

// RegistryEntry is one file's checkpoint as stored in the registry.
//
// On disk the registry is one JSON object,
// {"version":1,"files":[entry...],"audit":[count...]}, written to a
// temporary file, fsynced, renamed over tail-registry.json, and the
// directory fsynced, so a crash leaves either the old or the new registry.
// "audit" (AuditCount, absent in registries of earlier versions) holds the
// counts of the lines before the checkpoints of the same file.
type RegistryEntry struct {
	// ID is the file's persisted identity (random, fixed when the file was
	// first seen or found truncated); event ids derive from it.
	ID string `json:"id"`
	// Source is the path the file was found at; records carry it.
	Source string `json:"source"`
	// Path is where the file was last seen (differs after a rename).
	Path string `json:"path"`
	// Device and Inode identify the file on its filesystem.
	Device uint64 `json:"dev"`
	Inode  uint64 `json:"ino"`
	// FingerprintLen and Fingerprint are a hash of the file's first
	// FingerprintLen bytes, which tells a reused inode from the old file.
	FingerprintLen int    `json:"fp_len"`
	Fingerprint    string `json:"fp"`
	// Offset is the start of the oldest line not yet acknowledged by the
	// broker: everything before it was delivered.
	Offset int64 `json:"offset"`
	// Seen is when the file was last found by a scan.
	Seen time.Time `json:"seen"`
}

type registryFile struct {
	Version int             `json:"version"`
	Files   []RegistryEntry `json:"files"`
	Audit   []AuditCount    `json:"audit,omitempty"`
}

// ReadRegistry returns the entries stored in dataDir (none if it has no
// registry yet). Tests and operators use it to see what was delivered.
func ReadRegistry(dataDir string) ([]RegistryEntry, error) {
	rf, err := readRegistryFile(dataDir)
	return rf.Files, err
}

// ReadAuditCounts returns the audit counts stored in dataDir's registry:
// per source path and hour, the lines before the stored checkpoints.
func ReadAuditCounts(dataDir string) ([]AuditCount, error) {
	rf, err := readRegistryFile(dataDir)
	return rf.Audit, err
}

func readRegistryFile(dataDir string) (registryFile, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, registryFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return registryFile{}, nil
	}
	if err != nil {
		return registryFile{}, fmt.Errorf("tail: reading registry: %w", err)
	}
	var rf registryFile
	if err := json.Unmarshal(b, &rf); err != nil {
		return registryFile{}, fmt.Errorf("tail: registry %s is corrupt: %w", filepath.Join(dataDir, registryFileName), err)
	}
	if rf.Version != 1 {
		return registryFile{}, fmt.Errorf("tail: registry version %d is not supported", rf.Version)
	}
	return rf, nil
}

// writeRegistry replaces the registry in dataDir atomically: the entries'
// checkpoints and the audit counts of the lines before them, together.
func writeRegistry(dataDir string, entries []RegistryEntry, counts []AuditCount) error {
	sort.Slice(entries, func(i, j int) bool { return entries[i].ID < entries[j].ID })
	sort.Slice(counts, func(i, j int) bool {
		if counts[i].Source != counts[j].Source {
			return counts[i].Source < counts[j].Source
		}
		return counts[i].Hour < counts[j].Hour
	})
	b, err := json.MarshalIndent(registryFile{Version: 1, Files: entries, Audit: counts}, "", " ")
	if err != nil {
		return err
	}
	if err := durable.WriteFile(filepath.Join(dataDir, registryFileName), b); err != nil {
		return fmt.Errorf("tail: writing registry: %w", err)
	}
	return nil
}
