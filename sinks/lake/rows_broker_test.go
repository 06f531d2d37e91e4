package lake

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
	"millrace/store"
)

// TestOtelLogsRestartBothLayouts: with an in-process broker, OTLP log
// records of several log records each land in both layouts; the worker
// stops mid-stream and a new one lands the rest, where a record re-sends
// log records landed before the restart. With Hive files the group
// offset is also moved back into the landed stretch, as a crash after a
// window's files were published and before its commit leaves it: the
// window's files are cleared and its records landed again. Every log
// record is in the lake once, the re-sent ones dropped by the rebuilt
// dedup state.
func TestOtelLogsRestartBothLayouts(t *testing.T) {
	t.Parallel()
	for _, format := range []string{FormatHive, FormatIceberg} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			addr, _ := startBroker(t, t.TempDir())
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("otlp_logs"))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			adm := kadm.NewClient(cl)
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, "otlp_logs"); err != nil {
				t.Fatal(err)
			}
			now := time.Now().Truncate(time.Millisecond)
			produce := func(offset int64, ids []int, json bool) {
				t.Helper()
				hours := make([]int, len(ids))
				for i := range hours {
					hours[i] = i % 2
				}
				r := logRecord(t, offset, otlpLogs("svc", ids, hours), json)
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: r.Value, Timestamp: now.Add(time.Duration(offset) * time.Second)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			root := t.TempDir()
			st, err := store.NewFile(root, nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Brokers: []string{addr}, Group: "g", Topics: []string{"otlp_logs"}, Schema: "otel-logs",
				RollRows: 3, IdleTimeout: 100 * time.Millisecond, SuccessGrace: -1, SessionTimeout: 6 * time.Second, AuditTopic: "off"}
			if format == FormatIceberg {
				cfg.Format, cfg.Iceberg = FormatIceberg, TableConfig{Warehouse: root}
			}
			groupAt := func() int64 {
				offsets, err := adm.FetchOffsets(ctx, "g")
				if o, ok := offsets.Lookup("otlp_logs", 0); err == nil && ok {
					return o.At
				}
				return -1
			}
			landUntil := func(offset int64) {
				t.Helper()
				w, err := New(cfg, st, prometheus.NewRegistry(), nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Start(ctx); err != nil {
					t.Fatal(err)
				}
				waitfor.Until(t, time.Minute, fmt.Sprintf("the group offset at %d", offset), func() bool {
					select {
					case <-w.Done():
						t.Fatalf("the worker stopped: %v", w.Err())
					default:
					}
					return groupAt() == offset
				})
				if err := w.Shutdown(ctx); err != nil {
					t.Fatal(err)
				}
			}

			produce(0, []int{0, 1, 2}, false)
			produce(1, []int{3, 4}, true)
			produce(2, []int{5, 6, 7, 8}, false)
			produce(3, []int{9}, false)
			landUntil(4)
			if format == FormatHive {
				// Windows [0,1) and [1,3) and [3,4): back to 1, with record
				// 0's time as the committed watermark.
				back := kadm.Offsets{}
				back.Add(kadm.Offset{Topic: "otlp_logs", Partition: 0, At: 1, LeaderEpoch: -1,
					Metadata: encodeWatermark(now)})
				if _, err := adm.CommitOffsets(ctx, "g", back); err != nil {
					t.Fatal(err)
				}
			}
			produce(4, []int{1, 10, 6, 11}, false) // 1 and 6 again
			produce(5, []int{12, 13}, true)
			landUntil(6)

			var ids []string
			if format == FormatHive {
				for _, rows := range landedLogs(t, root) {
					for _, r := range rows {
						ids = append(ids, *r.EventID)
					}
				}
				sort.Strings(ids)
			} else {
				tbl, _ := readNamedTable(t, cfg, "otlp_logs")
				ids = scanEventIDs(t, tbl)
			}
			var want []string
			for n := range 14 {
				want = append(want, logID(n))
			}
			sort.Strings(want)
			if strings.Join(ids, " ") != strings.Join(want, " ") {
				t.Errorf("landed %d log records, want each of the %d once:\n%v\n%v", len(ids), len(want), ids, want)
			}
		})
	}
}
