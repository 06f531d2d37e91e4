package store_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"millrace/sinks/store"
	"millrace/sinks/store/storetest"
)

const (
	testAccessKey = "millracetest"
	testSecretKey = "millracetestsecret"
)

// versitygwBinary finds the S3 server the tests run against: $REPO/.bin first
// (where `make deps` installs it), then PATH.
func versitygwBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, ".bin", "versitygw")
			if _, err := os.Stat(p); err == nil {
				return p
			}
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	t.Fatal("versitygw (the S3 server these tests run against) is not installed: run `make deps` " +
		"(it installs github.com/versity/versitygw/cmd/versitygw@v1.8.0 into .bin/)")
	return ""
}

// startVersitygw runs versitygw with a POSIX backend on a loopback port until
// the test ends, and returns its endpoint URL.
func startVersitygw(t *testing.T) string {
	bin := versitygwBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	root := t.TempDir()
	cmd := exec.Command(bin, "--port", addr, "--access", testAccessKey, "--secret", testSecretKey,
		"--quiet", "posix", root)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		select {
		case err := <-exited:
			t.Fatalf("versitygw exited: %v\n%s", err, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw not listening on %s after 15s\n%s", addr, logs.String())
		}
	}
}

func TestS3Conformance(t *testing.T) {
	endpoint := startVersitygw(t)
	admin, err := minio.New(strings.TrimPrefix(endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(testAccessKey, testSecretKey, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	var buckets atomic.Int32
	t.Setenv("AWS_ACCESS_KEY_ID", testAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecretKey)
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
	endpoint := startVersitygw(t)
	_, err := store.NewS3(context.Background(), store.S3Config{Endpoint: endpoint, Bucket: "absent",
		AccessKey: testAccessKey, SecretKey: testSecretKey})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("NewS3 on a missing bucket: %v", err)
	}
}

// TestS3CleanupInterruptedPublish: a publish cut off between the parts and
// the completion leaves an unfinished upload under the final key; Cleanup
// aborts the matching ones only.
func TestS3CleanupInterruptedPublish(t *testing.T) {
	endpoint := startVersitygw(t)
	ctx := context.Background()
	admin, err := minio.New(strings.TrimPrefix(endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(testAccessKey, testSecretKey, ""), Region: "us-east-1",
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
		AccessKey: testAccessKey, SecretKey: testSecretKey})
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
