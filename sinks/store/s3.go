package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
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
	// PartSize is the multipart part size: default 8 MiB, minimum 5 MiB.
	PartSize int64
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger
}

const (
	defaultPartSize = 8 << 20
	minPartSize     = 5 << 20 // S3's minimum for every part but the last
)

// S3 is the S3 store. Objects are multipart uploads: parts are sent as the
// writer fills them (so memory stays at one part per open object) and the
// object appears only when the upload is completed.
type S3 struct {
	client *minio.Client
	core   minio.Core
	bucket string
	prefix string // "" or ends in "/"
	part   int64
	logger *slog.Logger
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
		part: cfg.PartSize, logger: cfg.Logger.With("component", "store", "store", "s3", "bucket", cfg.Bucket)}, nil
}

func (s *S3) key(name string) string { return s.prefix + name }

// Create implements Store: it starts a multipart upload.
func (s *S3) Create(ctx context.Context, name string) (Object, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	key := s.key(name)
	id, err := s.core.NewMultipartUpload(ctx, s.bucket, key, minio.PutObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("store: s3: start upload of %s: %w", key, err)
	}
	return &s3Object{store: s, name: name, key: key, uploadID: id}, nil
}

type s3Object struct {
	store    *S3
	name     string
	key      string
	uploadID string

	mu    sync.Mutex // guards the following
	buf   bytes.Buffer
	parts []minio.CompletePart
	done  bool
	err   error // sticky
}

func (o *s3Object) Name() string { return o.name }

// Write buffers p and uploads every full part. Part uploads have no context of
// their own; they use context.Background and minio-go's retry policy, and a
// failure is sticky.
func (o *s3Object) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return 0, ErrClosed
	}
	if o.err != nil {
		return 0, o.err
	}
	o.buf.Write(p)
	for int64(o.buf.Len()) >= o.store.part {
		if err := o.uploadPartLocked(context.Background(), o.store.part); err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

func (o *s3Object) uploadPartLocked(ctx context.Context, size int64) error {
	number := len(o.parts) + 1
	data := o.buf.Next(int(size))
	part, err := o.store.core.PutObjectPart(ctx, o.store.bucket, o.key, o.uploadID, number,
		bytes.NewReader(data), int64(len(data)), minio.PutObjectPartOptions{})
	if err != nil {
		o.err = fmt.Errorf("store: s3: upload part %d of %s: %w", number, o.key, err)
		return o.err
	}
	o.parts = append(o.parts, minio.CompletePart{PartNumber: number, ETag: part.ETag})
	return nil
}

// Publish uploads the last part and completes the upload; the object appears
// only then, whole.
func (o *s3Object) Publish(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return ErrClosed
	}
	if o.err != nil {
		return o.err
	}
	// A completed upload needs at least one part; an empty object is one empty part.
	if o.buf.Len() > 0 || len(o.parts) == 0 {
		if err := o.uploadPartLocked(ctx, int64(o.buf.Len())); err != nil {
			return err
		}
	}
	if _, err := o.store.core.CompleteMultipartUpload(ctx, o.store.bucket, o.key, o.uploadID, o.parts,
		minio.PutObjectOptions{}); err != nil {
		o.err = fmt.Errorf("store: s3: complete %s: %w", o.key, err)
		return o.err
	}
	o.done = true
	o.buf = bytes.Buffer{}
	return nil
}

func (o *s3Object) Abort(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return nil
	}
	o.done = true
	o.buf = bytes.Buffer{}
	if err := o.store.core.AbortMultipartUpload(ctx, o.store.bucket, o.key, o.uploadID); err != nil && !isNoSuchUpload(err) {
		return fmt.Errorf("store: s3: abort %s: %w", o.key, err)
	}
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
