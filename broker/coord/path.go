package coord

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ValidatePath checks a node path against ZooKeeper's rules: absolute,
// '/'-separated, no trailing slash (except the root "/"), no empty, "." or ".."
// components, no NUL or other control characters. The error wraps ErrBadPath.
func ValidatePath(path string) error {
	return validatePath(path, false)
}

// ValidateCreatePath is ValidatePath for Create: sequential modes may end in '/'
// because the counter is appended to the name ("/queue/" becomes
// "/queue/0000000007"), as ZooKeeper allows.
func ValidateCreatePath(path string, mode CreateMode) error {
	return validatePath(path, mode == PersistentSequential || mode == EphemeralSequential)
}

func validatePath(path string, sequential bool) error {
	bad := func(why string) error { return fmt.Errorf("%w: %q: %s", ErrBadPath, path, why) }
	if path == "" {
		return bad("empty")
	}
	if path[0] != '/' {
		return bad("not absolute")
	}
	if path == "/" {
		// The root itself; for sequential modes the name becomes "/0000000000".
		return nil
	}
	check := path
	if sequential {
		// The suffix makes a trailing slash a proper name.
		check += "0"
	}
	if strings.HasSuffix(check, "/") {
		return bad("trailing slash")
	}
	for _, component := range strings.Split(check[1:], "/") {
		switch component {
		case "":
			return bad("empty component")
		case ".", "..":
			return bad("relative component")
		}
	}
	for _, r := range check {
		// ZooKeeper rejects NUL, control characters and a few reserved ranges;
		// control characters are the ones that matter in practice.
		if r < 0x20 || r == 0x7f || (r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) {
			return bad("invalid character")
		}
	}
	return nil
}

// ParentPath returns the parent of a valid path: "/a/b" -> "/a", "/a" -> "/".
// The root's parent is the root.
func ParentPath(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

// BaseName returns the last component of a valid path: "/a/b" -> "b".
func BaseName(path string) string {
	return path[strings.LastIndexByte(path, '/')+1:]
}

// JoinPath appends a child name to a parent path.
func JoinPath(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}

// EnsurePath creates path and any missing ancestors as empty persistent nodes.
// Nodes that already exist (or are created concurrently by another client) are
// left alone, so several brokers may call it at once at startup.
func EnsurePath(s Store, path string) error {
	if err := ValidatePath(path); err != nil {
		return err
	}
	if path == "/" {
		return nil
	}
	if ok, _, err := s.Exists(path); err != nil {
		return err
	} else if ok {
		return nil
	}
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		prefix := path[:i]
		if _, err := s.Create(prefix, nil, Persistent); err != nil && !errors.Is(err, ErrNodeExists) {
			return fmt.Errorf("coord: ensure %s: %w", path, err)
		}
	}
	return nil
}

// EscapeName turns a name (a group, topic or transactional ID) into one
// valid path component:
// '%', '/', control characters, invalid UTF-8 and the code points ZooKeeper
// reserves become %XX per byte, and the names "", "." and ".." are escaped
// entirely. Kafka topic names never need escaping, so the common case reads
// naturally in the store.
func EscapeName(s string) string {
	if s == "" {
		return "%"
	}
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	var b strings.Builder
	for i, r := range s {
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, size = utf8.DecodeRuneInString(s[i:])
		}
		if r == '%' || r == '/' || r < 0x20 || r == 0x7f || r == utf8.RuneError ||
			(r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) {
			for _, ch := range []byte(s[i : i+size]) {
				fmt.Fprintf(&b, "%%%02X", ch)
			}
			continue
		}
		b.WriteString(s[i : i+size])
	}
	return b.String()
}

// UnescapeName reverses EscapeName; ok is false for a name EscapeName cannot
// have produced.
func UnescapeName(s string) (string, bool) {
	if s == "%" {
		return "", true
	}
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}
