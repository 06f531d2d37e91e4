package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kadm"

	"millrace/internal/pgtest"
	"millrace/internal/waitfor"
	"millrace/sinks/iceberg"
	"millrace/store"
)

// TestIcebergSinkGroup: three `millrace sink --format iceberg` workers of
// one group land clicks of six partitions into one table, in rolls of 100
// rows, committing to it concurrently. The first worker stops itself
// (SIGSTOP) right after publishing its first window's file and before the
// table commit; the other two take its partitions over once its session
// expires and land past it; one of them is SIGKILLed midway and restarted.
// Then the paused worker is SIGCONTed: its commit, built on the table it
// loaded before the pause, is refused by the catalog's compare-and-swap,
// the rebase finds its partition's offset moved (iceberg.ErrZombie), and
// the worker stops and is replaced by one that rejoins the group. Its file
// stays in the data directory, listed by no snapshot (the orphan sweep's).
// iceberg-go's scan finds every event exactly once, the snapshot summary's
// offsets equal the group's committed offsets, and DuckDB's read_parquet
// over the files the current snapshot lists gives the same count. On the
// SQLite catalog with a filesystem warehouse, and on the PostgreSQL catalog
// with the warehouse in S3 (versitygw). The workers that were never paused
// never stop on a landing failure: no commit is lost to another's.
func TestIcebergSinkGroup(t *testing.T) {
	t.Parallel()
	t.Run("sqlite-file", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		icebergGroupScenario(t, icebergGroupBackend{
			warehouse: "file://" + root,
			catalog:   iceberg.Config{Directory: root, Namespace: "millrace"},
			exists: func(_ context.Context, path string) bool {
				_, err := os.Stat(strings.TrimPrefix(path, "file://"))
				return err == nil
			},
			local: func(_ context.Context, path string) string { return strings.TrimPrefix(path, "file://") },
		})
	})
	t.Run("postgres-s3", func(t *testing.T) {
		t.Parallel()
		const bucket = "warehouse"
		server := startVersitygw(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s3 := server.newBucket(t, ctx, bucket)
		catalogURL := pgtest.Start(t)
		key := func(path string) string {
			k, ok := strings.CutPrefix(path, "s3://"+bucket+"/")
			if !ok {
				t.Fatalf("%s is outside the bucket", path)
			}
			return k
		}
		dir := t.TempDir()
		icebergGroupScenario(t, icebergGroupBackend{
			warehouse: "s3://" + bucket + "/lake",
			flags:     []string{"--s3-endpoint", server.endpoint(), "--catalog", "postgres", "--catalog-uri", catalogURL},
			env:       []string{"AWS_ACCESS_KEY_ID=" + s3AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3SecretKey},
			catalog: iceberg.Config{Catalog: iceberg.CatalogPostgres, URL: catalogURL, Namespace: "millrace",
				S3: &store.S3Config{Endpoint: server.endpoint(), Bucket: bucket, Prefix: "lake",
					AccessKey: s3AccessKey, SecretKey: s3SecretKey}},
			exists: func(ctx context.Context, path string) bool {
				_, err := s3.StatObject(ctx, bucket, key(path), minio.StatObjectOptions{})
				return err == nil
			},
			// DuckDB cannot install httpfs offline: each file the snapshot
			// lists is downloaded by its key and read where it lands.
			local: func(ctx context.Context, path string) string {
				local := filepath.Join(dir, strings.ReplaceAll(key(path), "/", "_"))
				if err := s3.FGetObject(ctx, bucket, key(path), local, minio.GetObjectOptions{}); err != nil {
					t.Fatal(err)
				}
				return local
			},
		})
	})
}

// icebergGroupBackend is where icebergGroupScenario's table lives.
type icebergGroupBackend struct {
	warehouse string                                        // --out: the warehouse's URL, as the table's file paths start
	flags     []string                                      // the sinks' catalog and store flags
	env       []string                                      // added to the sinks' environment
	catalog   iceberg.Config                                // the table's catalog, as a reader opens it
	exists    func(ctx context.Context, path string) bool   // whether a data file path is in the warehouse
	local     func(ctx context.Context, path string) string // a data file path as DuckDB can read it
}

// publishedFile is the file name the stop-after-publish hook logs.
var publishedFile = regexp.MustCompile(`stop-after-publish: stopping before the commit" published="?([^"\s]+)`)

func icebergGroupScenario(t *testing.T, be icebergGroupBackend) {
	const (
		topic      = "clicks"
		group      = "lake-group"
		partitions = 6
		total      = 3000
	)
	b := startBroker(t)
	b.createTopic(t, topic, partitions, nil)
	start := func(name string, extra ...string) *process {
		args := append([]string{"sink", "-b", b.addr, "--group", group, "--topic", topic, "--schema", "click",
			"--out", be.warehouse, "--format", "iceberg", "--roll-rows", "100",
			"--idle-timeout", "500ms", "--session-timeout", "6s", "--log-level", "warn"}, be.flags...)
		return startProcessOf(t, &process{t: t, name: name, bin: millraceBin, env: be.env, args: append(args, extra...)})
	}
	// All clicks fall in one hour, so every window is one file and the
	// hook after the first publish stops the worker between writing its
	// window and committing it.
	const hours = 1

	// The first worker, alone, reads about 20 records of each partition
	// and cuts its windows when they go idle; it stops after the first file.
	produceClicks(t, b, topic, 0, 120, hours, nil)
	zombie := start("sink-1", "--stop-after-publish", "1", "--log-level", "info")
	waitStopped(t, zombie, time.Minute)
	m := publishedFile.FindStringSubmatch(zombie.log())
	if m == nil {
		t.Fatalf("the paused worker logged no published file:\n%s", zombie.log())
	}
	// A layout name, <topic>/dt=…/hr=…/part-…, in the table's data directory.
	rest, _ := strings.CutPrefix(m[1], topic+"/")
	zombieFile := be.warehouse + "/millrace.db/" + topic + "/data/" + rest
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(zombie.pid(), syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume) // runs before the process's own cleanup stops it

	// More records first, so that the new owners' first windows (100
	// rows) end elsewhere than the paused worker's and name other files.
	produceClicks(t, b, topic, 120, 900, hours, nil)
	w2, w3 := start("sink-2"), start("sink-3")
	waitLanded(t, b, group, topic, 2*time.Minute, w2, w3)

	// A worker killed midway, its window maybe published and not
	// committed, and restarted.
	produceClicks(t, b, topic, 900, 2400, hours, nil)
	waitMidway(t, b, group, topic, 1000, 2*time.Minute)
	w2.kill()
	w2.restartAfter(100 * time.Millisecond)
	waitLanded(t, b, group, topic, 2*time.Minute, w2, w3)
	if c := strings.Count(zombie.log(), "stop-after-publish: stopping"); c != 1 {
		t.Fatalf("the paused worker stopped %d times, want once", c)
	}

	// The paused worker resumes into its commit, on the table it loaded
	// before the pause.
	resume()
	zombie.waitLog("the table's offsets moved past this worker", 1, time.Minute)
	if !strings.Contains(zombie.log(), "table commit conflict; rebasing") {
		t.Errorf("the paused worker's commit was not refused by the catalog (no conflict logged):\n%s", tail([]byte(zombie.log()), 4096))
	}
	zombie.waitLog("sink worker stopped; starting a new one", 1, time.Minute)
	adm := kadm.NewClient(kafkaClient(t, b))
	waitfor.Until(t, time.Minute, "the replaced worker rejoined (3 members)", func() bool {
		groups, err := adm.DescribeGroups(t.Context(), group)
		if err != nil {
			return false
		}
		g, ok := groups[group]
		return ok && g.State == "Stable" && len(g.Members) == 3
	})
	produceClicks(t, b, topic, 2400, total, hours, nil)
	waitLanded(t, b, group, topic, 2*time.Minute, zombie, w2, w3)
	for _, p := range []*process{zombie, w2, w3} {
		if !p.stop(syscall.SIGTERM, 30*time.Second) || p.exitCode() != 0 {
			t.Errorf("%s: status %d after SIGTERM", p.name, p.exitCode())
		}
	}

	// Concurrent commits to one table lost none: the two workers that
	// were never paused never stopped on a landing failure (a lost
	// compare-and-swap rebased past maxRebases, a busy catalog database).
	for _, p := range []*process{w2, w3} {
		if strings.Contains(p.log(), "sink worker stopped") {
			t.Errorf("%s stopped on a landing failure:\n%s", p.name, warnings([]byte(p.log()), 40))
		}
	}
	for _, p := range []*process{zombie, w2, w3} {
		if l := p.log(); strings.Contains(l, "database is locked") || strings.Contains(l, "SQLITE_BUSY") {
			t.Errorf("%s found the catalog's database locked:\n%s", p.name, warnings([]byte(l), 40))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tbl := loadIcebergTable(t, openIcebergCatalog(ctx, t, be.catalog), topic)
	checkIcebergScan(t, tbl, total)
	checkSnapshotOffsets(ctx, t, adm, tbl, group, topic, partitions)
	listed := checkDuckDBOverSnapshot(ctx, t, tbl, total, func(_ int, path string) string { return be.local(ctx, path) })

	// The paused worker's file was written and never committed: it is in
	// the data directory, and no snapshot lists it.
	if slices.Contains(listed, zombieFile) {
		t.Errorf("the current snapshot lists the paused worker's file %s", zombieFile)
	}
	if !be.exists(ctx, zombieFile) {
		t.Errorf("the paused worker's file %s is not in the warehouse", zombieFile)
	}
}
