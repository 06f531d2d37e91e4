package lakeread

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"millrace/schemas"
	"millrace/sinks/parquet"
	"millrace/store"
)

var hour10 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

// click is a click event of the given type and title at t.
func click(typ, title string, t time.Time) string {
	return fmt.Sprintf(`{"type":%q,"title":%q,"ts":%q}`, typ, title, t.Format(time.RFC3339Nano))
}

// land writes events as one Parquet file published under name, as a sink
// does.
func land(t *testing.T, st store.Store, name string, schema *schemas.Schema, events ...string) {
	t.Helper()
	ctx := context.Background()
	obj, err := st.Create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := parquet.NewWriter(obj, schema, parquet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := w.Append([]byte(e), hour10); err != nil {
			t.Fatalf("%s: %v", e, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := obj.Publish(ctx); err != nil {
		t.Fatal(err)
	}
}

// putGarbage publishes a file that is no Parquet: reading it fails, so a
// query that succeeds did not open it.
func putGarbage(t *testing.T, st store.Store, name string) {
	t.Helper()
	ctx := context.Background()
	obj, err := st.Create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obj.Write([]byte("not parquet")); err != nil {
		t.Fatal(err)
	}
	if err := obj.Publish(ctx); err != nil {
		t.Fatal(err)
	}
}

// newStore is a file store in a temporary directory.
func newStore(tb testing.TB) store.Store {
	tb.Helper()
	st, err := store.NewFile(tb.TempDir(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// layouts are the sink's two partition layouts: the directory of a bucket
// that holds t.
var layouts = map[string]func(topic string, t time.Time) string{
	"hour": func(topic string, t time.Time) string { return topic + t.Format("/dt=2006-01-02/hr=15") },
	"day":  func(topic string, t time.Time) string { return topic + t.Format("/dt=2006-01-02") },
}

// rows runs a query and returns its rows as text cells.
func rows(t *testing.T, st store.Store, q Query) ([]string, [][]string) {
	t.Helper()
	s, err := Open(context.Background(), st, q)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	err = s.Scan(context.Background(), func(values []any) error {
		row := make([]string, len(values))
		for i, v := range values {
			row[i] = Text(v)
		}
		out = append(out, row)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s.Columns(), out
}

func titles(rows [][]string) string {
	var out []string
	for _, r := range rows {
		out = append(out, r[len(r)-1])
	}
	return strings.Join(out, " ")
}

// TestHeadColumnsAndLimit reads the first rows, in file order (hour,
// partition, offset), with the columns asked for, on both layouts.
func TestHeadColumnsAndLimit(t *testing.T) {
	for layout, dir := range layouts {
		t.Run(layout, func(t *testing.T) {
			st := newStore(t)
			land(t, st, dir("clicks", hour10)+"/part-0-00000000000000000000-00000000000000000001.parquet", schemas.Click,
				click("page_view", "a", hour10), click("click", "b", hour10.Add(time.Minute)))
			land(t, st, dir("clicks", hour10)+"/part-1-00000000000000000000-00000000000000000000.parquet", schemas.Click,
				click("click", "c", hour10.Add(2*time.Minute)))
			land(t, st, dir("clicks", hour10.Add(24*time.Hour))+"/part-0-00000000000000000002-00000000000000000002.parquet", schemas.Click,
				click("signup", "d", hour10.Add(24*time.Hour)))
			// Another topic whose name starts with this one's stays out.
			land(t, st, dir("clicks2", hour10)+"/part-0-00000000000000000000-00000000000000000000.parquet", schemas.Click,
				click("click", "other", hour10))

			cols, got := rows(t, st, Query{Topic: "clicks", Columns: []string{"type", "title"}, Limit: 3})
			want := [][]string{{"page_view", "a"}, {"click", "b"}, {"click", "c"}}
			if !reflect.DeepEqual(cols, []string{"type", "title"}) || !reflect.DeepEqual(got, want) {
				t.Errorf("head 3: %v %v, want %v", cols, got, want)
			}
			_, got = rows(t, st, Query{Topic: "clicks", Columns: []string{"title"}})
			if titles(got) != "a b c d" {
				t.Errorf("cat: %v, want a b c d", got)
			}
			cols, got = rows(t, st, Query{Topic: "clicks", Limit: 1})
			if !reflect.DeepEqual(cols, schemaColumns(schemas.Click)) {
				t.Errorf("columns without --columns: %v", cols)
			}
			if len(got) != 1 || got[0][1] != "page_view" || got[0][4] != "a" || got[0][8] != "2024-05-01T10:00:00Z" || got[0][0] != "NULL" {
				t.Errorf("first row, all columns: %v", got)
			}
		})
	}
}

func schemaColumns(s *schemas.Schema) []string {
	var out []string
	for _, f := range s.Fields {
		out = append(out, f.Name)
	}
	return out
}

// TestTimeRange keeps the rows whose event time lies in [From, To), and
// never opens a file whose hour or day directory lies outside the range.
func TestTimeRange(t *testing.T) {
	for layout, dir := range layouts {
		t.Run(layout, func(t *testing.T) {
			st := newStore(t)
			land(t, st, dir("clicks", hour10)+"/part-0-00000000000000000000-00000000000000000002.parquet", schemas.Click,
				click("click", "10:00", hour10), click("click", "10:30", hour10.Add(30*time.Minute)), click("click", "10:59", hour10.Add(59*time.Minute)))
			land(t, st, dir("clicks", hour10.Add(time.Hour))+"/part-0-00000000000000000003-00000000000000000003.parquet", schemas.Click,
				click("click", "11:10", hour10.Add(70*time.Minute)))
			// Days before and after the range: unreadable, so the test
			// fails if they are opened.
			putGarbage(t, st, dir("clicks", hour10.Add(-24*time.Hour))+"/part-0-00000000000000000000-00000000000000000000.parquet")
			putGarbage(t, st, dir("clicks", hour10.Add(24*time.Hour))+"/part-0-00000000000000000009-00000000000000000009.parquet")

			for _, c := range []struct {
				from, to time.Time
				want     string
			}{
				{hour10.Add(30 * time.Minute), hour10.Add(2 * time.Hour), "10:30 10:59 11:10"},
				{hour10, hour10.Add(30 * time.Minute), "10:00"},
				{hour10.Add(59 * time.Minute), hour10.Add(71 * time.Minute), "10:59 11:10"},
				{hour10.Add(80 * time.Minute), hour10.Add(90 * time.Minute), ""},
			} {
				_, got := rows(t, st, Query{Topic: "clicks", Columns: []string{"title"}, From: c.from, To: c.to})
				if titles(got) != c.want {
					t.Errorf("%s..%s: %q, want %q", c.from.Format("15:04"), c.to.Format("15:04"), titles(got), c.want)
				}
			}
			// An open end reaches the unreadable day: the error says which file.
			s, err := Open(context.Background(), st, Query{Topic: "clicks", From: hour10})
			if err == nil {
				err = s.Scan(context.Background(), func([]any) error { return nil })
			}
			if err == nil || !strings.Contains(err.Error(), "part-0-00000000000000000009") {
				t.Errorf("a range with an unreadable file: %v", err)
			}
		})
	}
}

// TestLimitStopsReading stops at the limit without opening later files.
func TestLimitStopsReading(t *testing.T) {
	st := newStore(t)
	land(t, st, "clicks/dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000001.parquet", schemas.Click,
		click("click", "a", hour10), click("click", "b", hour10))
	putGarbage(t, st, "clicks/dt=2024-05-01/hr=11/part-0-00000000000000000002-00000000000000000002.parquet")
	// The newest file gives the columns, so it is read.
	land(t, st, "clicks/dt=2024-05-01/hr=12/part-0-00000000000000000003-00000000000000000003.parquet", schemas.Click, click("click", "c", hour10))
	if _, got := rows(t, st, Query{Topic: "clicks", Columns: []string{"title"}, Limit: 2}); titles(got) != "a b" {
		t.Errorf("limit 2: %v", got)
	}
}

// TestCount counts by a column's value, most frequent first, ties by value,
// NULL as its own group, within the time range.
func TestCount(t *testing.T) {
	for layout, dir := range layouts {
		t.Run(layout, func(t *testing.T) {
			st := newStore(t)
			land(t, st, dir("clicks", hour10)+"/part-0-00000000000000000000-00000000000000000004.parquet", schemas.Click,
				click("click", "x", hour10), click("page_view", "x", hour10), click("click", "y", hour10),
				`{"type":"signup","ts":"2024-05-01T10:05:00Z"}`, click("zoom", "y", hour10))
			land(t, st, dir("clicks", hour10.Add(48*time.Hour))+"/part-2-00000000000000000000-00000000000000000000.parquet", schemas.Click,
				click("click", "later", hour10.Add(48*time.Hour)))

			groups, err := Count(context.Background(), st, Query{Topic: "clicks", Limit: 1}, "type")
			if err != nil {
				t.Fatal(err)
			}
			want := []Group{{"click", 3}, {"page_view", 1}, {"signup", 1}, {"zoom", 1}}
			if !reflect.DeepEqual(groups, want) {
				t.Errorf("count by type: %v, want %v", groups, want)
			}
			groups, err = Count(context.Background(), st, Query{Topic: "clicks", To: hour10.Add(time.Hour)}, "title")
			if err != nil {
				t.Fatal(err)
			}
			want = []Group{{"x", 2}, {"y", 2}, {nil, 1}}
			if !reflect.DeepEqual(groups, want) {
				t.Errorf("count by title before 11:00: %v, want %v", groups, want)
			}
		})
	}
}

// TestColumnsAcrossSchemaVersions: a column added later reads as NULL in
// older files; one no file has is an error that lists the columns.
func TestColumnsAcrossSchemaVersions(t *testing.T) {
	st := newStore(t)
	v3, err := schemas.Click.Extend(schemas.Field{Name: "campaign", Type: schemas.TypeString})
	if err != nil {
		t.Fatal(err)
	}
	land(t, st, "clicks/dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000000.parquet", schemas.Click,
		click("click", "old", hour10))
	land(t, st, "clicks/dt=2024-05-01/hr=11/part-0-00000000000000000001-00000000000000000001.parquet", v3,
		`{"type":"click","title":"new","campaign":"spring","ts":"2024-05-01T11:00:00Z"}`)
	if _, got := rows(t, st, Query{Topic: "clicks", Columns: []string{"title", "campaign"}}); !reflect.DeepEqual(got, [][]string{{"old", "NULL"}, {"new", "spring"}}) {
		t.Errorf("rows across versions: %v", got)
	}
	_, err = Open(context.Background(), st, Query{Topic: "clicks", Columns: []string{"tpye"}})
	if err == nil || !strings.Contains(err.Error(), `no column "tpye"`) || !strings.Contains(err.Error(), "type, url") {
		t.Errorf("unknown column: %v", err)
	}
	if _, err := Count(context.Background(), st, Query{Topic: "clicks"}, "nope"); err == nil {
		t.Error("count by an unknown column succeeded")
	}
	_, err = Open(context.Background(), st, Query{Topic: "click"})
	if !errors.Is(err, ErrNoFiles) {
		t.Errorf("a topic without files: %v, want ErrNoFiles", err)
	}
}

// TestQueryValidate rejects topics that are no directory name, empty
// ranges and repeated columns.
func TestQueryValidate(t *testing.T) {
	for _, q := range []Query{
		{},
		{Topic: "../etc"},
		{Topic: "a/b"},
		{Topic: ".."},
		{Topic: "t", From: hour10, To: hour10},
		{Topic: "t", Limit: -1},
		{Topic: "t", Columns: []string{"a", "a"}},
		{Topic: "t", Columns: []string{""}},
	} {
		if err := q.Validate(); err == nil {
			t.Errorf("%+v: valid", q)
		}
	}
	if err := (&Query{Topic: "ops.metrics_2-x", From: hour10}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestMapsAndOtherTypes reads a log line's `fields` map, integers and
// booleans, and a metric's float.
func TestMapsAndOtherTypes(t *testing.T) {
	st := newStore(t)
	land(t, st, "logs/dt=2024-05-01/part-0-00000000000000000000-00000000000000000000.parquet", schemas.Log,
		`{"event_id":"e1","ts":"2024-05-01T10:00:00Z","source":"/var/log/a.log","offset":42,"line":"boom\n\tat x","truncated":true,"fields":{"service":"shop","env":"demo"}}`)
	land(t, st, "ops.metrics/dt=2024-05-01/part-0-00000000000000000000-00000000000000000001.parquet", schemas.Metric,
		`{"name":"q","kind":"gauge","value":1.5,"ts":"2024-05-01T10:00:00Z"}`,
		`{"name":"q","kind":"gauge","value":"+Inf","ts":"2024-05-01T10:00:01Z"}`)

	s, err := Open(context.Background(), st, Query{Topic: "logs", Columns: []string{"offset", "truncated", "fields", "line"}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := NewJSONWriter(&buf, s.Columns())
	if err := s.Scan(context.Background(), w.Write); err != nil {
		t.Fatal(err)
	}
	if want := `{"offset":42,"truncated":true,"fields":{"env":"demo","service":"shop"},"line":"boom\n\tat x"}` + "\n"; buf.String() != want {
		t.Errorf("log row as JSON:\n%s\nwant\n%s", buf.String(), want)
	}
	_, got := rows(t, st, Query{Topic: "ops.metrics", Columns: []string{"value"}})
	if !reflect.DeepEqual(got, [][]string{{"1.5"}, {"+Inf"}}) {
		t.Errorf("metric values: %v", got)
	}
}

// TestTableFormat aligns columns (numbers right), writes NULL, escapes
// control characters and cuts long cells.
func TestTableFormat(t *testing.T) {
	var buf bytes.Buffer
	w := NewTableWriter(&buf, []string{"type", "count", "when"})
	long := strings.Repeat("x", 60)
	for _, row := range [][]any{
		{"click", int64(3), time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)},
		{"page_view", int64(12), nil},
		{"a\nb", math.NaN(), nil},
		{long, int64(1), nil},
	} {
		if err := w.Write(row); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	cutCell := strings.Repeat("x", MaxCellWidth-1) + "…"
	pad := strings.Repeat(" ", MaxCellWidth)
	want := "type" + pad[:MaxCellWidth-4] + "  count  when\n" +
		"click" + pad[:MaxCellWidth-5] + "      3  2024-05-01T10:00:00Z\n" +
		"page_view" + pad[:MaxCellWidth-9] + "     12  NULL\n" +
		`a\nb` + pad[:MaxCellWidth-4] + "    NaN  NULL\n" +
		cutCell + "      1  NULL\n"
	if buf.String() != want {
		t.Errorf("table:\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestTableBlocks prints a long table in blocks, so it never holds every
// row: the header comes once, and rows appear before the end.
func TestTableBlocks(t *testing.T) {
	var buf bytes.Buffer
	w := NewTableWriter(&buf, []string{"n"})
	for i := 0; i < tableBlock; i++ {
		if err := w.Write([]any{int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if buf.Len() == 0 {
		t.Fatalf("nothing printed after %d rows", tableBlock)
	}
	if err := w.Write([]any{int64(1000)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != tableBlock+2 || strings.Count(buf.String(), "n\n") != 1 || lines[len(lines)-1] != "1000" {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

// TestRowWithoutTime: a row whose time column is NULL (the sink placed it
// by its record time) is judged by its directory alone.
func TestRowWithoutTime(t *testing.T) {
	for layout, dir := range layouts {
		t.Run(layout, func(t *testing.T) {
			st := newStore(t)
			land(t, st, dir("clicks", hour10)+"/part-0-00000000000000000000-00000000000000000001.parquet", schemas.Click,
				click("click", "timed", hour10), `{"type":"click","title":"untimed"}`)
			_, got := rows(t, st, Query{Topic: "clicks", Columns: []string{"title"}, From: hour10.Add(30 * time.Minute), To: hour10.Add(time.Hour)})
			if titles(got) != "untimed" {
				t.Errorf("10:30..11:00: %v, want the untimed row only", got)
			}
			_, got = rows(t, st, Query{Topic: "clicks", Columns: []string{"title"}, From: hour10.Add(-48 * time.Hour), To: hour10.Add(-24 * time.Hour)})
			if len(got) != 0 {
				t.Errorf("a range two days before: %v", got)
			}
		})
	}
}
