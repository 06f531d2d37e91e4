package store

import (
	"fmt"
	"path/filepath"
	"strings"
)

// LocationURL returns the URL Open takes for a store named either by a URL
// (`file:///path`, `s3://bucket/prefix`) or by a directory path, absolute or
// relative to the working directory: users name a lake the way `lake
// inspect` and their shell do, not only as a URL.
func LocationURL(location string) (string, error) {
	if location == "" {
		return "", fmt.Errorf("store: no location (want a directory, file:///path or s3://bucket/prefix)")
	}
	if strings.Contains(location, "://") {
		return location, nil
	}
	abs, err := filepath.Abs(location)
	if err != nil {
		return "", fmt.Errorf("store: %q: %w", location, err)
	}
	return "file://" + filepath.ToSlash(abs), nil
}
