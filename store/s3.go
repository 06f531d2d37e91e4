package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config configures the S3 store.
type S3Config struct {
	// Endpoint is the server URL ("http://127.0.0.1:17070"); the scheme picks
	// TLS. Default "https://s3.amazonaws.com".
	Endpoint string
	// Region defaults to "us-east-1".
	Region string
	// Bucket must exist.
	Bucket string
	// Prefix is prepended (with a "/") to every object name; may be empty.
	Prefix string
	// AccessKey and SecretKey are the static credentials.
	AccessKey, SecretKey string
	// PartSize is the multipart part size: default 8 MiB, minimum 5 MiB. An
	// object up to this size is uploaded with one PUT.
	PartSize int64
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
}

const (
	defaultPartSize = 8 << 20
	minPartSize     = 5 << 20 // S3's minimum for every part but the last
)

// S3 is the S3 store. An object is written to a local temporary file and
// uploaded when it is published, because its final key may be known only
// then (the lake names a file by its last row) and S3 cannot rename: a
// server-side copy would be a second full write, and servers do not all
// honour If-None-Match on a copy (versitygw v1.8.0 replaces the target). So
// an open object costs local disk (in os.TempDir()), not memory, and a
// publish uploads the whole object.
type S3 struct {
	client *minio.Client
	core   minio.Core
	bucket string
	prefix string // "" or ends in "/"
	part   int64
	logger *slog.Logger
	cfg    S3Config // as resolved by NewS3, for Config
}

// NewS3 connects to the server and checks that the bucket exists.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("store: s3: no bucket")
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "https://s3.amazonaws.com"
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = defaultPartSize
	}
	if cfg.PartSize < minPartSize {
		return nil, fmt.Errorf("store: s3: part size %d is below S3's minimum of 5 MiB", cfg.PartSize)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("store: s3: endpoint %q: want http://host:port or https://host", cfg.Endpoint)
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: u.Scheme == "https",
		Region: cfg.Region,
		// Path-style (endpoint/bucket/key) works with every S3 server;
		// virtual-host style needs DNS for each bucket.
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("store: s3: %w", err)
	}
	ok, err := client.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("store: s3: bucket %s: %w", cfg.Bucket, err)
	}
	if !ok {
		return nil, fmt.Errorf("store: s3: bucket %s does not exist", cfg.Bucket)
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &S3{client: client, core: minio.Core{Client: client}, bucket: cfg.Bucket, prefix: prefix,
		part: cfg.PartSize, logger: cfg.Logger.With("component", "store", "store", "s3", "bucket", cfg.Bucket), cfg: cfg}, nil
}

// Config returns the store's settings with their defaults applied, so that
// another client of the same bucket (an Iceberg table's file IO) can reach
// it exactly as the store does: same endpoint, region, credentials, and
// path-style addressing (NewS3 always uses it).
func (s *S3) Config() S3Config { return s.cfg }

func (s *S3) key(name string) string { return s.prefix + name }

// Create implements Store: it opens the local file the object is spooled to.
func (s *S3) Create(ctx context.Context, name string) (Object, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "millrace-s3-*")
	if err != nil {
		return nil, fmt.Errorf("store: s3: spool %s: %w", name, err)
	}
	return &s3Object{store: s, name: name, spool: f, pace: pacerOf(ctx)}, nil
}

type s3Object struct {
	store *S3
	name  string
	pace  Pacer // nil: sent at once

	mu    sync.Mutex // guards the following
	spool *os.File   // nil after Publish or Abort
	size  int64
	err   error // sticky
}

func (o *s3Object) Name() string { return o.name }

// Write appends p to the local spool file; a failure is sticky.
func (o *s3Object) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.spool == nil {
		return 0, ErrClosed
	}
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.spool.Write(p)
	o.size += int64(n)
	if err != nil {
		o.err = fmt.Errorf("store: s3: spool %s: %w", o.name, err)
		return n, o.err
	}
	return n, nil
}

// Publish implements Object.
func (o *s3Object) Publish(ctx context.Context) error { return o.PublishAs(ctx, o.name) }

// PublishAs uploads the spooled object under name, with `If-None-Match: *`:
// as one PUT when it fits in a part, else as a multipart upload whose
// completion carries the condition. The object appears only whole, and only
// if the name is free (ErrExists otherwise). The spool is removed whatever
// happens: a failed publish is retried by writing the object again.
func (o *s3Object) PublishAs(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.spool == nil {
		return ErrClosed
	}
	if o.err != nil {
		return o.err
	}
	defer o.closeSpoolLocked()
	key := o.store.key(name)
	var err error
	if o.size <= o.store.part {
		opts := minio.PutObjectOptions{DisableMultipart: true}
		opts.SetMatchETagExcept("*")
		_, err = o.store.client.PutObject(ctx, o.store.bucket, key, uploadBody(ctx, o.pace, o.spool, 0, o.size), o.size, opts)
	} else {
		err = o.multipartLocked(ctx, key)
	}
	if err != nil {
		if resp := minio.ToErrorResponse(err); resp.Code == "PreconditionFailed" || resp.StatusCode == http.StatusPreconditionFailed {
			return fmt.Errorf("%w: %s", ErrExists, name)
		}
		return fmt.Errorf("store: s3: publish %s: %w", key, err)
	}
	return nil
}

// multipartLocked uploads the spool as parts of the store's part size and
// completes the upload if the key is free; on any failure it aborts it.
func (o *s3Object) multipartLocked(ctx context.Context, key string) (err error) {
	core := o.store.core
	id, err := core.NewMultipartUpload(ctx, o.store.bucket, key, minio.PutObjectOptions{})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// Best effort: Cleanup removes what this leaves.
			core.AbortMultipartUpload(context.WithoutCancel(ctx), o.store.bucket, key, id)
		}
	}()
	var parts []minio.CompletePart
	for off := int64(0); off < o.size; off += o.store.part {
		n := min(o.store.part, o.size-off)
		number := len(parts) + 1
		part, err := core.PutObjectPart(ctx, o.store.bucket, key, id, number,
			uploadBody(ctx, o.pace, o.spool, off, n), n, minio.PutObjectPartOptions{})
		if err != nil {
			return fmt.Errorf("part %d: %w", number, err)
		}
		parts = append(parts, minio.CompletePart{PartNumber: number, ETag: part.ETag})
	}
	opts := minio.PutObjectOptions{}
	opts.SetMatchETagExcept("*")
	_, err = core.CompleteMultipartUpload(ctx, o.store.bucket, key, id, parts, opts)
	return err
}

// closeSpoolLocked closes and removes the spool file.
func (o *s3Object) closeSpoolLocked() {
	o.spool.Close()
	os.Remove(o.spool.Name())
	o.spool = nil
}

func (o *s3Object) Abort(context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.spool == nil {
		return nil
	}
	o.closeSpoolLocked()
	return nil
}

func isNoSuchUpload(err error) bool {
	return minio.ToErrorResponse(err).Code == "NoSuchUpload"
}

// Open implements Store.
func (s *S3) Open(ctx context.Context, name string) (Reader, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	// GetObject is lazy; Stat makes the first request, so a missing object
	// is reported here rather than on the first Read. Reads at an offset
	// are ranged GETs.
	obj, err := s.client.GetObject(ctx, s.bucket, s.key(name), minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("store: s3: get %s: %w", name, err)
	}
	info, err := obj.Stat()
	if err != nil {
		obj.Close()
		resp := minio.ToErrorResponse(err)
		if resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
		}
		return nil, fmt.Errorf("store: s3: get %s: %w", name, err)
	}
	return s3Reader{obj, info.Size}, nil
}

// s3Reader is an object being read and its size.
type s3Reader struct {
	*minio.Object
	size int64
}

func (r s3Reader) Size() int64 { return r.size }

// List implements Store.
func (s *S3) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.key(prefix), Recursive: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("store: s3: list %q: %w", prefix, obj.Err)
		}
		if strings.HasSuffix(obj.Key, "/") {
			continue // a directory marker some servers report
		}
		out = append(out, ObjectInfo{Name: strings.TrimPrefix(obj.Key, s.prefix), Size: obj.Size, ModTime: obj.LastModified})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove implements Store.
func (s *S3) Remove(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := s.client.RemoveObject(ctx, s.bucket, s.key(name), minio.RemoveObjectOptions{}); err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil
		}
		return fmt.Errorf("store: s3: remove %s: %w", name, err)
	}
	return nil
}

// Cleanup implements Store: it aborts unfinished multipart uploads.
func (s *S3) Cleanup(ctx context.Context, prefix string, match func(string) bool) (int, error) {
	type upload struct{ key, id string }
	var uploads []upload
	for u := range s.client.ListIncompleteUploads(ctx, s.bucket, s.key(prefix), true) {
		if u.Err != nil {
			return 0, fmt.Errorf("store: s3: list uploads %q: %w", prefix, u.Err)
		}
		name := strings.TrimPrefix(u.Key, s.prefix)
		if match == nil || match(name) {
			uploads = append(uploads, upload{u.Key, u.UploadID})
		}
	}
	n := 0
	for _, u := range uploads {
		if err := s.core.AbortMultipartUpload(ctx, s.bucket, u.key, u.id); err != nil && !isNoSuchUpload(err) {
			return n, fmt.Errorf("store: s3: abort %s: %w", u.key, err)
		}
		n++
		s.logger.Info("aborted unfinished upload", "key", u.key, "upload_id", u.id)
	}
	return n, nil
}

// Close implements Store. The client holds only idle HTTP connections.
func (s *S3) Close() error { return nil }
