package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

const (
	s3AccessKey = "millracee2e"
	s3SecretKey = "millracee2esecret"
)

// startVersitygw runs the S3 server (versitygw with a POSIX backend, installed
// into .bin by `make deps`) on a loopback port and returns its endpoint URL.
func startVersitygw(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs("../.bin/versitygw")
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		if bin, err = exec.LookPath("versitygw"); err != nil {
			t.Fatal("versitygw is not installed: run `make deps`")
		}
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(bin, "--port", addr, "--access", s3AccessKey, "--secret", s3SecretKey, "--quiet", "posix", t.TempDir())
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	for deadline := time.Now().Add(15 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return "http://" + addr
		}
		select {
		case <-exited:
			t.Fatalf("versitygw exited:\n%s", logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw not listening after 15s:\n%s", logs.String())
		}
	}
}

// TestSinkS3ExactlyOnce: the pipeline of TestSinkFilesystemExactlyOnce, with
// fewer records, landing in S3 (versitygw); one worker is killed midway. The
// objects are downloaded with minio-go and checked with DuckDB; no multipart
// upload is left unfinished, and every hour gets its _SUCCESS marker.
func TestSinkS3ExactlyOnce(t *testing.T) {
	const (
		total  = 120_000
		topic  = "clicks"
		group  = "lake-s3"
		bucket = "warehouse"
	)
	endpoint := startVersitygw(t)
	s3, err := minio.New(strings.TrimPrefix(endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(s3AccessKey, s3SecretKey, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := s3.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", s3AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3SecretKey)

	b := startBroker(t)
	b.createTopic(t, topic, 6, nil)
	want := produceClicks(t, b, topic, 0, total, 3, nil)
	// The config file sets what has no flag; flags still override it.
	cfgPath := filepath.Join(t.TempDir(), "sink.yaml")
	if err := os.WriteFile(cfgPath, []byte("out: s3://warehouse/lake\ns3_endpoint: "+endpoint+
		"\nlake:\n  success_interval: 200ms\n  success_grace: 1m\n  roll_rows: 5000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var sinks []*process
	for _, name := range []string{"sink-a", "sink-b"} {
		sinks = append(sinks, startProcess(t, name, "sink", "-b", b.addr, "--group", group, "--topic", topic,
			"--schema", "click", "--config", cfgPath, "--idle-timeout", "500ms", "--session-timeout", "6s", "--log-level", "warn"))
	}
	adm := b.admin(t)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		committed, end := groupProgress(t, adm, group, topic)
		if committed >= end {
			t.Fatalf("everything landed before the kill")
		}
		if committed >= total/3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d records landed after 1m", committed)
		}
	}
	sinks[0].kill()
	sinks[0].restartAfter(200 * time.Millisecond)
	waitLanded(t, b, group, topic, 2*time.Minute, sinks...)

	// Every hour directory gets its marker once all partitions are past it.
	hours := map[string]bool{}
	for h := range want {
		d, hr, _ := strings.Cut(h, " ")
		hours["lake/clicks/dt="+d+"/hr="+hr+"/_SUCCESS"] = false
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		missing := 0
		for key := range hours {
			if _, err := s3.StatObject(ctx, bucket, key, minio.StatObjectOptions{}); err != nil {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of %d _SUCCESS markers missing after 30s", missing, len(hours))
			break
		}
	}
	for _, s := range sinks {
		if !s.stop(syscall.SIGTERM, 30*time.Second) || s.exitCode() != 0 {
			t.Errorf("%s: status %d after SIGTERM", s.name, s.exitCode())
		}
	}

	local := t.TempDir()
	n := 0
	for obj := range s3.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "lake/", Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if !strings.HasSuffix(obj.Key, ".parquet") {
			continue
		}
		if err := s3.FGetObject(ctx, bucket, obj.Key, filepath.Join(local, obj.Key), minio.GetObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no Parquet objects in the bucket")
	}
	checkLake(t, local+"/lake/clicks/**/*.parquet", want)
	for u := range s3.ListIncompleteUploads(ctx, bucket, "lake/", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		t.Errorf("unfinished multipart upload left behind: %s", u.Key)
	}
}
