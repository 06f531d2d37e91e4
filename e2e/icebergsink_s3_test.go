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
	"github.com/twmb/franz-go/pkg/kadm"

	"millrace/internal/pgtest"
	"millrace/sinks/iceberg"
	"millrace/store"
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
	s3 := server.newBucket(t, ctx, bucket)
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

	cat := openIcebergCatalog(ctx, t, iceberg.Config{Catalog: iceberg.CatalogPostgres, URL: catalogURL, Namespace: "millrace",
		S3: &store.S3Config{Endpoint: server.endpoint(), Bucket: bucket, Prefix: "lake", AccessKey: s3AccessKey, SecretKey: s3SecretKey}})
	tbl := loadIcebergTable(t, cat, topic)
	const location = "s3://" + bucket + "/lake/millrace.db/" + topic
	if tbl.Location() != location || !strings.HasPrefix(tbl.MetadataLocation(), location+"/metadata/") {
		t.Errorf("the table is at %s, its metadata at %s; want both under %s", tbl.Location(), tbl.MetadataLocation(), location)
	}
	checkIcebergScan(t, tbl, total)
	checkSnapshotOffsets(ctx, t, kadm.NewClient(kafkaClient(t, b)), tbl, group, topic, 2)

	// DuckDB reads S3 through its httpfs extension, which it installs from
	// the network: not here. So the files the snapshot lists are
	// downloaded, each by its key, and read where they land.
	dir := t.TempDir()
	checkDuckDBOverSnapshot(ctx, t, tbl, total, func(i int, path string) string {
		key, ok := strings.CutPrefix(path, "s3://"+bucket+"/")
		if !ok {
			t.Fatalf("the snapshot lists %s, outside the bucket", path)
		}
		local := filepath.Join(dir, fmt.Sprintf("%d.parquet", i))
		if err := s3.FGetObject(ctx, bucket, key, local, minio.GetObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		return local
	})
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
