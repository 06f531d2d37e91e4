package e2e

// OTLP log records landed in the lake: franz-go produces records in the
// shape agents/otlp and the Collector's Kafka exporter write (one pdata
// export request per record, otlp_proto and otlp_json), `millrace sink
// --schema otel-logs` lands them as Hive Parquet files and as an Iceberg
// table, and DuckDB counts the log records by service_name.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// TestOtelLake: 24 records of one to three resources and several log
// records each (a quarter of them OTLP JSON) go to otlp_logs; two sinks,
// one writing Hive Parquet files and one an Iceberg table, land them with
// --schema otel-logs, and DuckDB's count of rows by service_name over
// either layout is what was produced, with every event_id once.
func TestOtelLake(t *testing.T) {
	t.Parallel()
	const topic = "otlp_logs"
	b := startBroker(t)
	b.createTopic(t, topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	services := []string{"checkout", "cart", "search"}
	want := map[string]int64{}
	total := 0
	cl := b.client(t, kgo.DefaultProduceTopic(topic))
	now := time.Now().UTC()
	for i := range 24 {
		ld := plog.NewLogs()
		for r := range 1 + i%3 {
			service := services[(i+r)%len(services)]
			rl := ld.ResourceLogs().AppendEmpty()
			rl.Resource().Attributes().PutStr("service.name", service)
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName("e2e")
			for k := range 1 + (i+r)%5 {
				lr := sl.LogRecords().AppendEmpty()
				lr.SetTimestamp(pcommon.NewTimestampFromTime(now.Add(-time.Duration(k) * time.Hour)))
				lr.SetSeverityNumber(plog.SeverityNumberInfo)
				lr.Body().SetStr(fmt.Sprintf("record %d resource %d log %d", i, r, k))
				lr.Attributes().PutStr("event_id", uuid.Must(uuid.NewV7()).String())
				want[service]++
				total++
			}
		}
		var value []byte
		var err error
		if i%4 == 3 {
			value, err = new(plog.JSONMarshaler).MarshalLogs(ld)
		} else {
			value, err = new(plog.ProtoMarshaler).MarshalLogs(ld)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	hiveRoot, tableRoot := t.TempDir(), t.TempDir()
	common := []string{"-b", b.addr, "--topic", topic, "--schema", "otel-logs", "--roll-rows", "20",
		"--idle-timeout", "500ms", "--session-timeout", "6s", "--log-level", "warn"}
	hive := startProcess(t, "sink-hive", append([]string{"sink", "--group", "lake-hive", "--out", "file://" + hiveRoot}, common...)...)
	table := startProcess(t, "sink-iceberg", append([]string{"sink", "--group", "lake-iceberg", "--out", "file://" + tableRoot,
		"--format", "iceberg"}, common...)...)
	waitLanded(t, b, "lake-hive", topic, time.Minute, hive)
	waitLanded(t, b, "lake-iceberg", topic, time.Minute, table)
	for _, p := range []*process{hive, table} {
		if !p.stop(syscall.SIGTERM, 30*time.Second) || p.exitCode() != 0 {
			t.Fatalf("%s: status %d after SIGTERM", p.name, p.exitCode())
		}
	}

	files := icebergDataFiles(t, loadIcebergTable(t, openIcebergDirCatalog(ctx, t, tableRoot), topic))
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = "'" + localFilePath(i, f) + "'"
	}
	for layout, source := range map[string]string{
		"hive":    fmt.Sprintf("read_parquet('%s', hive_partitioning = true)", filepath.Join(hiveRoot, topic, "dt=*", "hr=*", "*.parquet")),
		"iceberg": fmt.Sprintf("read_parquet([%s])", strings.Join(quoted, ", ")),
	} {
		db := openDuck(t)
		rows, err := db.Query(`SELECT service_name, count(*), count(DISTINCT event_id) FROM ` + source + ` GROUP BY service_name`)
		if err != nil {
			t.Fatalf("%s: %v", layout, err)
		}
		got := map[string]int64{}
		for rows.Next() {
			var service string
			var n, distinct int64
			if err := rows.Scan(&service, &n, &distinct); err != nil {
				t.Fatal(err)
			}
			if n != distinct {
				t.Errorf("%s: %s has %d rows but %d distinct event ids", layout, service, n, distinct)
			}
			got[service] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: DuckDB counts %v log records by service_name; %d were produced: %v", layout, got, total, want)
		}
	}
}
