package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"millrace/internal/s3test"
	"millrace/store"
	"millrace/store/storetest"
)

func TestS3Conformance(t *testing.T) {
	endpoint := s3test.Start(t)
	admin, err := minio.New(strings.TrimPrefix(endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(s3test.AccessKey, s3test.SecretKey, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	var buckets atomic.Int32
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	storetest.Run(t, storetest.Config{
		New: func(t *testing.T) store.Store {
			ctx := context.Background()
			bucket := fmt.Sprintf("lake-%d", buckets.Add(1))
			if err := admin.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
				t.Fatal(err)
			}
			// Through Open, as the CLI does: credentials from the environment,
			// a prefix that every name is stored under.
			s, err := store.Open(ctx, "s3://"+bucket+"/warehouse/", store.Options{
				S3Endpoint: endpoint, PartSize: 5 << 20})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		LargeObject:   11 << 20, // three parts of 5 MiB
		SpoolsLocally: true,
	})

	// Objects really live under the prefix.
	ctx := context.Background()
	var keys []string
	for obj := range admin.ListObjects(ctx, "lake-1", minio.ListObjectsOptions{Recursive: true}) {
		keys = append(keys, obj.Key)
	}
	if len(keys) == 0 || !strings.HasPrefix(keys[0], "warehouse/") {
		t.Errorf("keys in the first bucket: %v", keys)
	}
}

func TestS3MissingBucket(t *testing.T) {
	endpoint := s3test.Start(t)
	_, err := store.NewS3(context.Background(), store.S3Config{Endpoint: endpoint, Bucket: "absent",
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("NewS3 on a missing bucket: %v", err)
	}
}

// TestS3CleanupInterruptedPublish: a publish cut off between the parts and
// the completion leaves an unfinished upload under the final key; Cleanup
// aborts the matching ones only.
func TestS3CleanupInterruptedPublish(t *testing.T) {
	endpoint := s3test.Start(t)
	ctx := context.Background()
	admin, err := minio.New(strings.TrimPrefix(endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(s3test.AccessKey, s3test.SecretKey, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.MakeBucket(ctx, "lake", minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	core := minio.Core{Client: admin}
	for _, key := range []string{"w/c/part-3-0-9.parquet", "w/c/part-4-0-9.parquet"} {
		if _, err := core.NewMultipartUpload(ctx, "lake", key, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := store.NewS3(ctx, store.S3Config{Endpoint: endpoint, Bucket: "lake", Prefix: "w",
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Cleanup(ctx, "c/", func(name string) bool { return strings.Contains(name, "/part-3-") })
	if err != nil || n != 1 {
		t.Fatalf("Cleanup = %d, %v; want 1", n, err)
	}
	var left []string
	for u := range admin.ListIncompleteUploads(ctx, "lake", "w/", true) {
		left = append(left, u.Key)
	}
	if fmt.Sprint(left) != "[w/c/part-4-0-9.parquet]" {
		t.Errorf("unfinished uploads left: %v", left)
	}
}
