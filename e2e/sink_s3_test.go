package e2e

import (
	"context"
	"fmt"
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

	"millrace/internal/waitfor"
	"millrace/schemas"
)

const (
	s3AccessKey = "millracee2e"
	s3SecretKey = "millracee2esecret"
)

// s3Server is versitygw (installed into .bin by `make deps`) serving a POSIX
// directory on a loopback port; stop and start keep the address and the data.
type s3Server struct {
	t        *testing.T
	bin, dir string
	addr     string
	logs     strings.Builder
	cmd      *exec.Cmd
	exited   chan struct{}
}

// startVersitygw starts an S3 server for the test; it is killed at cleanup.
func startVersitygw(t *testing.T) *s3Server {
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
	s := &s3Server{t: t, bin: bin, dir: t.TempDir(), addr: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *s3Server) endpoint() string { return "http://" + s.addr }

// makeBucket creates bucket and returns a minio-go client of the server; it
// sets the AWS credentials in the environment for the sink processes.
func (s *s3Server) makeBucket(t *testing.T, ctx context.Context, bucket string) *minio.Client {
	t.Helper()
	client := s.newBucket(t, ctx, bucket)
	t.Setenv("AWS_ACCESS_KEY_ID", s3AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3SecretKey)
	return client
}

// newBucket creates bucket and returns a client of the server. Unlike
// makeBucket it leaves this process's environment alone, which a parallel
// test may not set: such a test gives its processes the credentials in
// their own environment.
func (s *s3Server) newBucket(t *testing.T, ctx context.Context, bucket string) *minio.Client {
	t.Helper()
	client, err := minio.New(s.addr, &minio.Options{
		Creds: credentials.NewStaticV4(s3AccessKey, s3SecretKey, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	return client
}

// start runs the server and waits until it listens.
func (s *s3Server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "--port", s.addr, "--access", s3AccessKey, "--secret", s3SecretKey, "--quiet", "posix", s.dir)
	s.cmd.Stdout, s.cmd.Stderr = &s.logs, &s.logs
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(cmd *exec.Cmd) { cmd.Wait(); close(exited) }(s.cmd)
	defer reportLastSeen(s.t, func() string { return "versitygw's output:\n" + s.logs.String() })()
	waitfor.Until(s.t, 15*time.Second, "versitygw to listen", func() bool {
		if c, err := net.DialTimeout("tcp", s.addr, 200*time.Millisecond); err == nil {
			c.Close()
			return true
		}
		select {
		case <-exited:
			s.t.Fatalf("versitygw exited:\n%s", s.logs.String())
		default:
		}
		return false
	})
}

// stop kills the server (no clean shutdown) and waits for it to exit.
func (s *s3Server) stop() {
	s.cmd.Process.Kill()
	<-s.exited
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
	server := startVersitygw(t)
	endpoint := server.endpoint()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s3 := server.makeBucket(t, ctx, bucket)

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
	waitMidway(t, b, group, topic, total/3, time.Minute)
	sinks[0].kill()
	sinks[0].restartAfter(200 * time.Millisecond)
	waitLanded(t, b, group, topic, 2*time.Minute, sinks...)

	// Every hour directory gets its marker once all partitions are past it.
	hours := map[string]bool{}
	for h := range want {
		d, hr, _ := strings.Cut(h, " ")
		hours["lake/clicks/dt="+d+"/hr="+hr+"/_SUCCESS"] = false
	}
	missing := 0
	defer reportLastSeen(t, func() string { return fmt.Sprintf("%d of %d _SUCCESS markers missing", missing, len(hours)) })()
	waitfor.Until(t, 30*time.Second, "every hour's _SUCCESS marker", func() bool {
		missing = 0
		for key := range hours {
			if _, err := s3.StatObject(ctx, bucket, key, minio.StatObjectOptions{}); err != nil {
				missing++
			}
		}
		return missing == 0
	})
	for _, s := range sinks {
		if !s.stop(syscall.SIGTERM, 30*time.Second) || s.exitCode() != 0 {
			t.Errorf("%s: status %d after SIGTERM", s.name, s.exitCode())
		}
	}

	keys := checkS3Lake(t, ctx, s3, bucket, want)

	// `lake inspect` reads the footers in place (ranged GETs): every object
	// under a prefix, one named object, and a prefix with nothing under it.
	inspect := run(t, time.Minute, "", millraceBin, "lake", "inspect", "s3://"+bucket+"/lake/clicks", "--s3-endpoint", endpoint)
	if !strings.Contains(inspect, fmt.Sprintf("\ntotal: %d files, %d rows\n", len(keys), total)) {
		t.Errorf("lake inspect of the prefix: want %d files, %d rows:\n%s", len(keys), total, tail([]byte(inspect), 1024))
	}
	one := run(t, time.Minute, "", millraceBin, "lake", "inspect", "--s3-endpoint", endpoint, "s3://"+bucket+"/"+keys[0])
	for _, line := range []string{"file: s3://" + bucket + "/" + keys[0] + " (", fmt.Sprintf("schema: click v%d ", schemas.Click.Version), "codec: SNAPPY\n", "millrace.topic = clicks\n"} {
		if !strings.Contains(one, line) {
			t.Errorf("lake inspect of %s does not show %q:\n%s", keys[0], line, one)
		}
	}
	if _, errOut, err := runErr(time.Minute, "", millraceBin, "lake", "inspect", "--s3-endpoint", endpoint, "s3://"+bucket+"/lake/click"); err == nil || !strings.Contains(errOut, "no .parquet objects under s3://"+bucket+"/lake/click") {
		t.Errorf("lake inspect of a prefix with no objects under it as a directory: %v\n%s", err, errOut)
	}
}

// checkS3Lake downloads the Parquet objects under lake/ with minio-go, checks
// them with checkLake, checks that no multipart upload is left unfinished,
// and returns the objects' keys.
func checkS3Lake(t *testing.T, ctx context.Context, s3 *minio.Client, bucket string, want map[string]int) []string {
	t.Helper()
	local := t.TempDir()
	var keys []string
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
		keys = append(keys, obj.Key)
	}
	if len(keys) == 0 {
		t.Fatal("no Parquet objects in the bucket")
	}
	checkLake(t, local+"/lake/clicks/**/*.parquet", want)
	for u := range s3.ListIncompleteUploads(ctx, bucket, "lake/", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		t.Errorf("unfinished multipart upload left behind: %s", u.Key)
	}
	return keys
}

// TestSinkS3Outage: the S3 server is killed while the sink is landing and
// comes back on the same address; the workers that failed meanwhile are
// replaced, and every event lands exactly once, with no multipart upload left
// unfinished.
func TestSinkS3Outage(t *testing.T) {
	const (
		total  = 60_000
		topic  = "clicks"
		group  = "lake-s3"
		bucket = "warehouse"
	)
	server := startVersitygw(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s3 := server.makeBucket(t, ctx, bucket)

	b := startBroker(t)
	b.createTopic(t, topic, 3, nil)
	want := produceClicks(t, b, topic, 0, total, 3, nil)
	sink := startSink(t, b, "sink", group, topic, "s3://"+bucket+"/lake", "--s3-endpoint", server.endpoint(), "--roll-rows", "2000")
	waitMidway(t, b, group, topic, total/4, time.Minute)
	server.stop()
	sink.waitLog("sink worker stopped; starting a new one", 1, 2*time.Minute)
	server.start()
	waitLanded(t, b, group, topic, 2*time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Errorf("sink: status %d after SIGTERM", sink.exitCode())
	}
	checkS3Lake(t, ctx, s3, bucket, want)
}
