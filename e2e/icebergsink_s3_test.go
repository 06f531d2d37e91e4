package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/twmb/franz-go/pkg/kadm"

	"millrace/internal/pgtest"
	"millrace/sinks/iceberg"
	"millrace/sinks/store"
)

// TestIcebergSinkS3KilledMidStream: TestIcebergSinkKilledMidStream with the
// catalog on PostgreSQL and the warehouse in S3 (versitygw): `millrace sink
// --format iceberg --catalog postgres --out s3://…` lands clicks of two
// partitions in rolls of 100 rows, is SIGKILLed midway and restarted. The
// table, its metadata and its data files are in the bucket; iceberg-go's
// scan (through its own S3 file IO) finds every event exactly once, the
// snapshot's offsets equal the group's committed offsets, and DuckDB's
// read_parquet over the files the current snapshot lists gives the same
// count.
func TestIcebergSinkS3KilledMidStream(t *testing.T) {
	t.Parallel()
	const (
		total  = 2000
		topic  = "clicks"
		group  = "lake"
		bucket = "warehouse"
	)
	server := startVersitygw(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Not server.makeBucket: it sets the credentials in this process's
	// environment, which a parallel test may not; the sink gets them in its own.
	s3, err := minio.New(server.addr, &minio.Options{Creds: credentials.NewStaticV4(s3AccessKey, s3SecretKey, ""),
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	catalogURL := pgtest.Start(t)
	b := startBroker(t)
	b.createTopic(t, topic, 2, nil)
	produceClicks(t, b, topic, 0, total, 2, nil)
	sink := startProcessOf(t, &process{t: t, name: "sink", bin: millraceBin,
		env: []string{"AWS_ACCESS_KEY_ID=" + s3AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3SecretKey},
		args: []string{"sink", "-b", b.addr, "--group", group, "--topic", topic, "--schema", "click",
			"--out", "s3://" + bucket + "/lake", "--s3-endpoint", server.endpoint(),
			"--format", "iceberg", "--catalog", "postgres", "--catalog-uri", catalogURL, "--roll-rows", "100",
			"--idle-timeout", "500ms", "--session-timeout", "6s", "--log-level", "warn"}})

	waitMidway(t, b, group, topic, total/4, 2*time.Minute)
	sink.kill()
	sink.restartAfter(100 * time.Millisecond)
	waitLanded(t, b, group, topic, 2*time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Errorf("SIGTERM did not end the sink with status 0 (status %d)", sink.exitCode())
	}

	cat, err := iceberg.Open(ctx, iceberg.Config{Catalog: iceberg.CatalogPostgres, URL: catalogURL, Namespace: "millrace",
		S3: &store.S3Config{Endpoint: server.endpoint(), Bucket: bucket, Prefix: "lake", AccessKey: s3AccessKey, SecretKey: s3SecretKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.Catalog().LoadTable(ctx, cat.Identifier(topic))
	if err != nil {
		t.Fatal(err)
	}
	const location = "s3://" + bucket + "/lake/millrace.db/" + topic
	if tbl.Location() != location || !strings.HasPrefix(tbl.MetadataLocation(), location+"/metadata/") {
		t.Errorf("the table is at %s, its metadata at %s; want both under %s", tbl.Location(), tbl.MetadataLocation(), location)
	}

	rows, distinct := icebergScanCounts(t, tbl)
	if rows != total || distinct != total {
		t.Errorf("iceberg-go scan: %d rows, %d distinct event ids; want %d, %d", rows, distinct, total, total)
	}

	progress, err := iceberg.ReadProgress(tbl, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := kadm.NewClient(kafkaClient(t, b)).FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	for part := range int32(2) {
		committed, _ := offs.Lookup(topic, part)
		if at, ok := progress.Offsets[part]; !ok || at != committed.At {
			t.Errorf("partition %d: the snapshot's offset is %d (%v), the group's %d", part, at, ok, committed.At)
		}
	}

	// DuckDB reads S3 through its httpfs extension, which it installs from
	// the network: not here. So the files the snapshot lists are
	// downloaded, each by its key, and read where they land.
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := make([]string, 0, len(tasks))
	for i, task := range tasks {
		key, ok := strings.CutPrefix(task.File.FilePath(), "s3://"+bucket+"/")
		if !ok {
			t.Fatalf("the snapshot lists %s, outside the bucket", task.File.FilePath())
		}
		local := filepath.Join(dir, fmt.Sprintf("%d.parquet", i))
		if err := s3.FGetObject(ctx, bucket, key, local, minio.GetObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		files = append(files, "'"+local+"'")
	}
	var count, ids int64
	q := fmt.Sprintf("SELECT count(*), count(DISTINCT event_id) FROM read_parquet([%s])", strings.Join(files, ", "))
	if err := openDuck(t).QueryRow(q).Scan(&count, &ids); err != nil {
		t.Fatal(err)
	}
	if count != total || ids != total {
		t.Errorf("DuckDB over the snapshot's %d files: %d rows, %d distinct event ids; want %d", len(files), count, ids, total)
	}
}

// TestIcebergSinkS3SQLiteNeedsFile: the sqlite catalog's file cannot live
// in a bucket, so `millrace sink --format iceberg --out s3://…` without
// --catalog-uri is a usage error (status 2) that says so, and with one it
// gets past the settings (to the store, which has no server here).
func TestIcebergSinkS3SQLiteNeedsFile(t *testing.T) {
	t.Parallel()
	args := []string{"sink", "-b", "127.0.0.1:1", "--group", "g", "--topic", "clicks", "--schema", "click",
		"--out", "s3://warehouse/lake", "--s3-endpoint", "http://127.0.0.1:1", "--format", "iceberg"}
	status := func(err error) int {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		return 0
	}
	_, errOut, err := runErr(time.Minute, "", millraceBin, args...)
	if code := status(err); code != 2 || !strings.Contains(errOut, "the sqlite catalog of a warehouse in S3 (s3://warehouse/lake) needs a local file") {
		t.Errorf("no --catalog-uri: status %d (%v)\n%s", code, err, errOut)
	}
	_, errOut, err = runErr(time.Minute, "", millraceBin, append(args, "--catalog-uri", filepath.Join(t.TempDir(), "catalog.db"))...)
	if code := status(err); code != 1 || !strings.Contains(errOut, "store: s3: bucket warehouse") {
		t.Errorf("with --catalog-uri: status %d (%v), want the store's failure to reach the server\n%s", code, err, errOut)
	}
}
