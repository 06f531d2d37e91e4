package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/sinks/iceberg"
)

// TestIcebergSinkSchemaEvolution: `millrace sink --format iceberg` lands
// clicks on the click schema; restarted with a field added (--field
// campaign:string) it evolves the table as it opens it, and lands clicks
// of which some carry the field. iceberg-go's scan shows the new column,
// with values for the new rows and null for the older ones, whose files
// are still the table's, unrewritten. Among the new clicks are records
// the schema refuses: they land as rows of the clicks~dlq table with
// their offsets, raw bytes and reasons, and every good click around them
// is in the clicks table once. A restart with a type change the table
// cannot take stops at start, naming the field.
func TestIcebergSinkSchemaEvolution(t *testing.T) {
	t.Parallel()
	const (
		topic, group = "clicks", "lake"
		oldClicks    = 10 // [0, 10) on the click schema
		newClicks    = 10 // two runs of 5 around the refused records
		total        = oldClicks + newClicks
	)
	b := startBroker(t)
	b.createTopic(t, topic, 1, nil)
	root := t.TempDir()
	out := "file://" + root
	iceArgs := []string{"--format", "iceberg", "--roll-rows", "4"}

	produceClicks(t, b, topic, 0, oldClicks, 1, nil)
	sink := startSink(t, b, "sink-v1", group, topic, out, iceArgs...)
	waitLanded(t, b, group, topic, time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Fatalf("sink-v1: status %d after SIGTERM", sink.exitCode())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cat := openIcebergDirCatalog(ctx, t, root)
	v1Files := icebergDataFiles(t, loadIcebergTable(t, cat, topic))

	// Offsets: [0, 10) old clicks, [10, 15) new ones, [15, 18) refused,
	// [18, 23) new ones. Even clicks carry the campaign.
	campaign := func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf(`,"campaign":"spring-%d"`, i)
		}
		return ""
	}
	produceClicks(t, b, topic, oldClicks, oldClicks+newClicks/2, 1, campaign)
	refused := [][]byte{
		[]byte("not json"),
		[]byte(`{"event_id":"no-type","ts":"2024-05-01T08:00:00Z"}`),
		nil, // an empty value
	}
	cl := b.client(t, kgo.DefaultProduceTopic(topic))
	for i, v := range refused {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "refused-%d", i), Value: v}).FirstErr(); err != nil {
			t.Fatalf("produce refused record %d: %v", i, err)
		}
	}
	produceClicks(t, b, topic, oldClicks+newClicks/2, total, 1, campaign)

	v2 := append([]string{"--field", "campaign:string"}, iceArgs...)
	sink = startSink(t, b, "sink-v2", group, topic, out, v2...)
	waitLanded(t, b, group, topic, time.Minute, sink)
	if !sink.stop(syscall.SIGTERM, 30*time.Second) || sink.exitCode() != 0 {
		t.Fatalf("sink-v2: status %d after SIGTERM", sink.exitCode())
	}

	// A change the table cannot take is refused at start, naming the field.
	args := append([]string{"sink", "-b", b.addr, "--group", group, "--topic", topic, "--schema", "click", "--out", out,
		"--field", "campaign:int64"}, iceArgs...)
	if _, stderr, err := runErr(time.Minute, "", millraceBin, args...); err == nil || !strings.Contains(stderr, `"campaign"`) {
		t.Errorf("campaign:string -> campaign:int64: err %v, stderr %q; want a refusal naming the field", err, stderr)
	}

	tbl := loadIcebergTable(t, cat, topic)
	field, ok := tbl.Schema().FindFieldByName("campaign")
	if !ok || field.Required || !field.Type.Equals(iceberggo.PrimitiveTypes.String) || field.ID != tbl.Metadata().LastColumnID() {
		t.Errorf("campaign column %+v (found %v); want an optional string with the table's last column ID %d",
			field, ok, tbl.Metadata().LastColumnID())
	}
	checkIcebergScan(t, tbl, total)
	got := icebergColumnByEventID(t, tbl, "campaign")
	for i := range total {
		want := "null"
		if i >= oldClicks && i%2 == 0 {
			want = fmt.Sprintf("spring-%d", i)
		}
		if id := fmt.Sprintf("ev-%09d", i); got[id] != want {
			t.Errorf("%s: campaign %s, want %s", id, got[id], want)
		}
	}
	if now := icebergDataFiles(t, tbl); !isSubset(v1Files, now) {
		t.Errorf("the files of schema v1 are not all in the evolved table:\nv1  %v\nnow %v", v1Files, now)
	}

	// The refused records, in the dead-letter table, once each.
	dlq := loadIcebergTable(t, cat, topic+iceberg.DeadLetterSuffix)
	letters := icebergDeadLetters(t, dlq)
	if len(letters) != len(refused) {
		t.Errorf("%d dead-letter rows, want %d: %v", len(letters), len(refused), letters)
	}
	for i, v := range refused {
		offset := int64(oldClicks + newClicks/2 + i)
		l, ok := letters[offset]
		if !ok {
			t.Errorf("no dead-letter row for offset %d", offset)
			continue
		}
		if l.topic != topic || l.partition != 0 || l.reason == "" || !bytes.Equal(l.raw, v) {
			t.Errorf("offset %d: topic %q, partition %d, reason %q, raw %q; want %s, 0, a reason, %q",
				offset, l.topic, l.partition, l.reason, l.raw, topic, v)
		}
	}

	// Both tables' offsets follow the group's.
	offs, err := kadm.NewClient(kafkaClient(t, b)).FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, _ := offs.Lookup(topic, 0)
	progress, err := iceberg.ReadProgress(tbl, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	dlqProgress, err := iceberg.ReadProgress(dlq, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := int64(total + len(refused))
	if progress.Offsets[0] != end || committed.At != end || dlqProgress.Offsets[0] <= offsetOfLast(letters) {
		t.Errorf("offsets: table %v, group %d, dead-letter table %v; want %d, %d, past %d",
			progress.Offsets, committed.At, dlqProgress.Offsets, end, end, offsetOfLast(letters))
	}
}

// icebergDataFiles lists the data files of tbl's current snapshot, sorted.
func icebergDataFiles(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	files := make([]string, 0, len(tasks))
	for _, task := range tasks {
		files = append(files, task.File.FilePath())
	}
	slices.Sort(files)
	return files
}

func isSubset(sub, of []string) bool {
	for _, s := range sub {
		if !slices.Contains(of, s) {
			return false
		}
	}
	return true
}

// icebergColumnByEventID reads column col of every row of tbl with
// iceberg-go's scan, by event_id; "null" for a null.
func icebergColumnByEventID(t *testing.T, tbl *table.Table, col string) map[string]string {
	t.Helper()
	_, batches, err := tbl.Scan(table.WithSelectedFields("event_id", col)).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		ids, values := rec.Column(rec.Schema().FieldIndices("event_id")[0]), rec.Column(rec.Schema().FieldIndices(col)[0])
		for i := range int(rec.NumRows()) {
			v := "null"
			if !values.IsNull(i) {
				v = values.ValueStr(i)
			}
			out[ids.ValueStr(i)] = v
		}
		rec.Release()
	}
	return out
}

// icebergDeadLetter is one row of a dead-letter table.
type icebergDeadLetter struct {
	topic     string
	partition int32
	raw       []byte
	reason    string
}

// icebergDeadLetters reads a dead-letter table with iceberg-go's scan, by
// offset; an offset found twice fails the test.
func icebergDeadLetters(t *testing.T, tbl *table.Table) map[int64]icebergDeadLetter {
	t.Helper()
	_, batches, err := tbl.Scan().ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]icebergDeadLetter{}
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		column := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		for i := range int(rec.NumRows()) {
			offset := column(iceberg.DeadLetterOffset).GetOneForMarshal(i).(int64)
			if _, dup := out[offset]; dup {
				t.Errorf("offset %d is in the dead-letter table twice", offset)
			}
			l := icebergDeadLetter{topic: column(iceberg.DeadLetterTopic).ValueStr(i),
				partition: column(iceberg.DeadLetterPartition).GetOneForMarshal(i).(int32),
				reason:    column(iceberg.DeadLetterReason).ValueStr(i)}
			if raw := column(iceberg.DeadLetterRaw); !raw.IsNull(i) {
				l.raw = raw.GetOneForMarshal(i).([]byte)
			}
			out[offset] = l
		}
		rec.Release()
	}
	return out
}

func offsetOfLast(letters map[int64]icebergDeadLetter) int64 {
	if len(letters) == 0 {
		return -1
	}
	return slices.Max(slices.Collect(maps.Keys(letters)))
}
