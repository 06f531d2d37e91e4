// Package s3test starts a real S3 server for tests: versitygw (which
// `make deps` installs into .bin/) with a POSIX backend in a temporary
// directory, on a free loopback port, killed when the test ends.
package s3test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"millrace/internal/waitfor"
)

// The static credentials the server accepts.
const (
	AccessKey = "millracetest"
	SecretKey = "millracetestsecret"
)

// StartBucket starts a server with one bucket and returns its endpoint
// URL ("http://127.0.0.1:PORT"); the bucket's region is us-east-1, and it
// is addressed by path.
func StartBucket(t testing.TB, bucket string) string {
	t.Helper()
	// Creating the bucket is the readiness check: it fails until the
	// server listens.
	return start(t, "versitygw creating bucket "+bucket, func(client *minio.Client) bool {
		return client.MakeBucket(t.Context(), bucket, minio.MakeBucketOptions{Region: "us-east-1"}) == nil
	})
}

// Start starts a server with no bucket and returns its endpoint URL
// ("http://127.0.0.1:PORT").
func Start(t testing.TB) string {
	t.Helper()
	return start(t, "versitygw answering", func(client *minio.Client) bool {
		_, err := client.ListBuckets(t.Context())
		return err == nil
	})
}

// start runs versitygw until the test ends and waits until ready, given a
// client of it, says it is.
func start(t testing.TB, what string, ready func(*minio.Client) bool) string {
	t.Helper()
	bin := binary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--port", addr, "--access", AccessKey, "--secret", SecretKey, "--quiet", "posix", t.TempDir())
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("s3test: start versitygw: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	client, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""),
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 15*time.Second, what, func() bool {
		select {
		case <-exited:
			t.Fatalf("s3test: versitygw exited:\n%s", logs.String())
		default:
		}
		return ready(client)
	})
	return "http://" + addr
}

// binary finds versitygw: the module's .bin/ first, then PATH.
func binary(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if p := filepath.Join(dir, ".bin", "versitygw"); fileExists(p) {
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
	t.Fatal("s3test: versitygw is not installed: run `make deps`")
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
