package lake

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIcebergIdentityPartition lands clicks into a table partitioned by
// identity on user_id: a value longer than a footer's truncated statistics,
// a short one, and null (absent) are interleaved in one hour. Each data file
// holds one value and carries it as its partition value, so a scan filtered
// on a value reads exactly that value's rows, and every row is there once.
func TestIcebergIdentityPartition(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newIcebergFixture(ctx, t, 1, kgo.DefaultProduceTopic("clicks"))
	f.cfg.Iceberg.Partition, f.cfg.RollRows = "identity:user_id", 5
	cl, cfg := f.client, f.cfg
	const long = "user-with-an-identifier-longer-than-sixteen-bytes"
	users := []string{long, "u2", "", long, "", "u2", long}
	for i, u := range users {
		r := click(int64(i), 0)
		if u != "" {
			r.Value = []byte(strings.Replace(string(r.Value), `"type"`, fmt.Sprintf(`"user_id":%q,"type"`, u), 1))
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: r.Value, Timestamp: r.Timestamp}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	f.landUntil(ctx, t, f.startWorker(ctx, t), 7)

	tbl, _ := readTable(t, cfg)
	if got := tbl.Spec().String(); !strings.Contains(got, "identity(") {
		t.Errorf("spec %s, want identity on user_id", got)
	}
	if got := scanEventIDs(t, tbl); strings.Join(got, " ") != "e0 e1 e2 e3 e4 e5 e6" {
		t.Errorf("the table holds %v, want e0 … e6 once each", got)
	}
	// Windows [0, 5) and [5, 7): files of long, u2 and null, then u2 and long.
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, task := range tasks {
		values = append(values, fmt.Sprint(task.File.Partition()))
	}
	slices.Sort(values)
	want := []string{"map[1000:<nil>]", "map[1000:u2]", "map[1000:u2]", "map[1000:" + long + "]", "map[1000:" + long + "]"}
	if !slices.Equal(values, want) {
		t.Errorf("partition values of the data files:\n%v\nwant\n%v", values, want)
	}
	for value, ids := range map[string]string{long: "e0 e3 e6", "u2": "e1 e5"} {
		filtered := tbl.Scan(table.WithRowFilter(iceberggo.EqualTo(iceberggo.Reference("user_id"), value)))
		if got := scanIDs(t, filtered); got != ids {
			t.Errorf("user_id = %q: %s, want %s", value, got, ids)
		}
	}
	if got := scanIDs(t, tbl.Scan(table.WithRowFilter(iceberggo.IsNull(iceberggo.Reference("user_id"))))); got != "e2 e4" {
		t.Errorf("user_id is null: %s, want e2 e4", got)
	}
}

// scanIDs is the sorted distinct event ids a scan reads, space separated.
func scanIDs(t *testing.T, scan *table.Scan) string {
	t.Helper()
	return strings.Join(slices.Compact(readEventIDs(t, scan)), " ")
}
