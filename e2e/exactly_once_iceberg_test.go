package e2e

import (
	"context"
	"testing"
	"time"

	"millrace/sinks/iceberg"
)

// TestEndToEndExactlyOnceIceberg is TestEndToEndExactlyOnce's scenario with
// the sinks landing Iceberg tables (`--format iceberg`, the lake's SQLite
// catalog), at a tenth of its counts, and the beacon SIGKILLed mid-stream
// too:
//   - 20,000 log lines written through rotations while the tailer is
//     SIGKILLed 3 times and the log sink twice;
//   - 2,000 clicks posted by a client that sends a body again after a 503,
//     a timeout or a connection error, while the beacon is SIGKILLed and
//     restarted (the requests it held fail and go to its next run) and the
//     broker is SIGSTOPped for longer than the beacon's ack timeout.
//
// iceberg-go's scan of each table and DuckDB over the files the tables'
// current snapshots list find every line and click exactly once, and
// `millrace audit`, reading the tables through the catalog, adds up per
// source and hour: the logs exactly, the clicks exactly on the lake's side
// (landed and deduplicated), their accepted count short only by what the
// killed beacon run had not yet published, which the audit reports as
// unknown rather than a mismatch.
func TestEndToEndExactlyOnceIceberg(t *testing.T) {
	t.Parallel()
	runExactlyOnce(t, exactlyOnceScenario{format: "iceberg", lines: 20_000, linesPerTick: 1, clicks: 2_000, clickBatch: 10, killBeacon: true})
}

// checkExactlyOnceTables asserts with iceberg-go's table scan that the
// current snapshots of the logs and clicks tables in the warehouse root
// hold lines and clicks rows, each event id once.
func checkExactlyOnceTables(t *testing.T, root string, lines, clicks int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat, err := iceberg.Open(ctx, iceberg.Config{Directory: root, Namespace: "millrace"})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	for topic, want := range map[string]int{"logs": lines, "clicks": clicks} {
		tbl, err := cat.Catalog().LoadTable(ctx, cat.Identifier(topic))
		if err != nil {
			t.Fatal(err)
		}
		rows, distinct := icebergScanCounts(t, tbl)
		t.Logf("iceberg-go scan of %s: %d rows, %d distinct event ids", topic, rows, distinct)
		if rows != want || distinct != want {
			t.Errorf("iceberg-go scan of %s: %d rows, %d distinct event ids; want %d of each", topic, rows, distinct, want)
		}
	}
}
