package log

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"millrace/internal/durable"
)

// Checkpoint files are text, as Kafka's are:
//
//	line 1: version (0)
//	line 2: number of entries N
//	N lines: space-separated integers
//
// They are replaced atomically: write a temp file, fsync it, rename it over
// the old one, fsync the directory.

// writeCheckpoint atomically replaces path with the given entries.
func writeCheckpoint(path string, entries [][]int64) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(entries))
	for _, e := range entries {
		for i, v := range e {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.FormatInt(v, 10))
		}
		b.WriteByte('\n')
	}
	return durable.WriteFile(path, b.Bytes())
}

// readCheckpoint reads a checkpoint whose entries have width integers each.
// A missing file yields no entries and no error.
func readCheckpoint(path string, width int) ([][]int64, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != strconv.Itoa(checkpointVersion) {
		return nil, fmt.Errorf("log: checkpoint %s: bad header", path)
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("log: checkpoint %s: entry count does not match", path)
	}
	out := make([][]int64, 0, n)
	for _, line := range lines[2:] {
		fields := strings.Fields(line)
		if len(fields) != width {
			return nil, fmt.Errorf("log: checkpoint %s: line %q has %d fields, want %d", path, line, len(fields), width)
		}
		e := make([]int64, width)
		for i, f := range fields {
			if e[i], err = strconv.ParseInt(f, 10, 64); err != nil {
				return nil, fmt.Errorf("log: checkpoint %s: %w", path, err)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// readOffsetCheckpoint reads a single-offset checkpoint; ok is false if absent.
func readOffsetCheckpoint(path string) (offset int64, ok bool, err error) {
	entries, err := readCheckpoint(path, 1)
	if err != nil || len(entries) == 0 {
		return 0, false, err
	}
	return entries[0][0], true, nil
}
