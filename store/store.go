// Package store holds the output backends of the sinks behind one interface:
// write an object under a temporary identity, publish it atomically under its
// final name, list and read published objects, and clean up what a crashed
// writer left behind.
//
//   - file: an HDFS-style directory tree. An object is written to
//     `<dir>/.tmp-<name>-<random>`, fsynced, hard-linked to its final name
//     (link(2) fails when the name exists, so nothing is ever replaced), the
//     temporary name removed, and the directory fsynced, so after a crash a
//     name holds either nothing or the whole file.
//   - s3: S3-compatible object storage via minio-go. An object is spooled to
//     a local temporary file and uploaded when published (one PUT, or a
//     multipart upload for more than a part), with `If-None-Match: *` on the
//     PUT or on CompleteMultipartUpload, so it becomes visible only whole and
//     only if the name is free. Unfinished uploads are the leftovers.
//
// Names are slash-separated keys relative to the store's root
// ("clicks/dt=2024-05-01/hr=10/part-3-1200-1299.parquet"). Publishing never
// replaces an object: a name that exists makes Publish fail with ErrExists.
// The lake relies on it to keep a paused former owner of a partition from
// replacing the files of the new one (sinks/lake/doc.go).
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Store is an output backend. Implementations are safe for concurrent use;
// each Object is used by one goroutine.
type Store interface {
	// Create starts an object that becomes visible as name only when published.
	Create(ctx context.Context, name string) (Object, error)
	// Open reads a published object.
	Open(ctx context.Context, name string) (Reader, error)
	// List returns the published objects whose names start with prefix, sorted
	// by name. Temporary objects are never listed.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Remove deletes a published object; removing a missing one is not an error.
	Remove(ctx context.Context, name string) error
	// Cleanup discards unpublished leftovers (temporary files, unfinished
	// multipart uploads) whose final names start with prefix and, when match
	// is not nil, satisfy it, and returns how many it discarded. A worker calls
	// it for the partitions it has just been assigned: their previous owner is
	// gone, and whatever it left unpublished will be rewritten.
	Cleanup(ctx context.Context, prefix string, match func(name string) bool) (int, error)
	// Close releases the store's resources.
	Close() error
}

// Object is an object being written.
type Object interface {
	io.Writer
	// Name is the final name the object is published under.
	Name() string
	// Publish makes the object visible under its name, atomically: readers
	// see nothing or the whole object. When an object of that name exists it
	// fails with ErrExists (wrapped) and leaves the existing one as it was;
	// the object is then discarded, as by Abort.
	Publish(ctx context.Context) error
	// PublishAs is Publish under another name (anywhere in the store), for a
	// writer that learns the final name only when it has written everything.
	PublishAs(ctx context.Context, name string) error
	// Abort discards the object. It is safe to call after Publish or another
	// Abort (it then does nothing), so `defer obj.Abort(ctx)` is the idiom.
	Abort(ctx context.Context) error
}

// Reader reads a published object, in order or at any offset (a Parquet
// reader starts at the footer, at the end).
type Reader interface {
	io.Reader
	io.ReaderAt
	io.Closer
	// Size is the object's length in bytes.
	Size() int64
}

// ObjectInfo describes a published object.
type ObjectInfo struct {
	Name    string
	Size    int64
	ModTime time.Time
}

// ErrNotFound is returned (wrapped) by Open for a missing object.
var ErrNotFound = errors.New("store: object not found")

// ErrExists is returned (wrapped) by Publish when the name is taken. On S3 it
// needs a server that honours `If-None-Match: *` on PutObject and
// CompleteMultipartUpload (AWS S3 since 2024, MinIO, versitygw); one that
// ignores the header replaces the object instead.
var ErrExists = errors.New("store: object already exists")

// ErrClosed is returned by an Object after Publish or Abort.
var ErrClosed = errors.New("store: object already published or aborted")

// Options configures Open.
type Options struct {
	// S3Endpoint is the S3 server's URL, e.g. "http://127.0.0.1:17070";
	// default "https://s3.amazonaws.com".
	S3Endpoint string
	// S3Region defaults to "us-east-1".
	S3Region string
	// AccessKey and SecretKey default to the AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY environment variables.
	AccessKey, SecretKey string
	// PartSize is the S3 multipart part size; default 8 MiB, minimum 5 MiB
	// (S3's own minimum for all but the last part).
	PartSize int64
	// Logger receives cleanup and publish events; nil discards them.
	Logger *slog.Logger
}

// Open returns the store for a URL: `file:///absolute/path` or
// `s3://bucket/prefix`, or for a directory given as a plain path.
func Open(ctx context.Context, rawURL string, opts Options) (Store, error) {
	if isPath(rawURL) {
		canonical, err := CanonicalURL(rawURL)
		if err != nil {
			return nil, err
		}
		rawURL = canonical
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store: %q: %w", rawURL, err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("store: %q: a file URL has no host (file:///path)", rawURL)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("store: %q: no path", rawURL)
		}
		return NewFile(u.Path, opts.Logger)
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("store: %q: no bucket (s3://bucket/prefix)", rawURL)
		}
		cfg := S3Config{
			Endpoint:  opts.S3Endpoint,
			Region:    opts.S3Region,
			Bucket:    u.Host,
			Prefix:    strings.Trim(u.Path, "/"),
			AccessKey: opts.AccessKey,
			SecretKey: opts.SecretKey,
			PartSize:  opts.PartSize,
			Logger:    opts.Logger,
		}
		if cfg.AccessKey == "" {
			cfg.AccessKey = os.Getenv("AWS_ACCESS_KEY_ID")
		}
		if cfg.SecretKey == "" {
			cfg.SecretKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
		}
		return NewS3(ctx, cfg)
	}
	return nil, fmt.Errorf("store: %q: want a file:///path or s3://bucket/prefix URL", rawURL)
}

// checkName rejects names that would escape the root or cannot be a key.
func checkName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") ||
		path.Clean(name) != name || name == "." || strings.HasPrefix(name, "../") || name == ".." {
		return fmt.Errorf("store: invalid object name %q (want a clean relative path)", name)
	}
	if strings.HasPrefix(path.Base(name), tmpPrefix) {
		return fmt.Errorf("store: object name %q uses the reserved prefix %q", name, tmpPrefix)
	}
	return nil
}

// tmpPrefix starts the base name of every temporary file of the file store.
const tmpPrefix = ".tmp-"

// isPath reports whether a lake was named by a plain path, not a URL.
func isPath(s string) bool { return s != "" && !strings.Contains(s, "://") }

// CanonicalURL names a lake the same way wherever it is written, so that
// what a sink announced and what an audit is asked for compare equal: a
// plain path (absolute, or relative to the working directory) and a
// file:// URL become file:///absolute/clean/path; an s3:// URL loses the
// slashes around its prefix.
func CanonicalURL(raw string) (string, error) {
	if isPath(raw) {
		abs, err := filepath.Abs(raw)
		if err != nil {
			return "", fmt.Errorf("store: %q: %w", raw, err)
		}
		return "file://" + filepath.ToSlash(abs), nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("store: %q: %w", raw, err)
	}
	switch u.Scheme {
	case "file":
		if u.Path == "" {
			return "", fmt.Errorf("store: %q: no path", raw)
		}
		return "file://" + path.Clean(u.Path), nil
	case "s3":
		prefix := strings.Trim(u.Path, "/")
		if prefix == "" {
			return "s3://" + u.Host, nil
		}
		return "s3://" + u.Host + "/" + prefix, nil
	}
	return "", fmt.Errorf("store: %q: want a directory, a file:///path or an s3://bucket/prefix URL", raw)
}
