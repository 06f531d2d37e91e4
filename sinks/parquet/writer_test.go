package parquet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"millrace/schemas"
	"millrace/sinks/parquet/parquettest"
)

var base = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

// clickEvent returns a varied click event: optional fields come and go, some
// carry unknown top-level fields, timestamps alternate between RFC 3339 and
// epoch milliseconds.
func clickEvent(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"event_id":"018f%028x","type":%q`, i, []string{"page_view", "click", "signup"}[i%3])
	if i%4 != 0 {
		fmt.Fprintf(&b, `,"url":"https://shop.example/p/%d?q=\"a\"","title":"Product \u00e9 %d"`, i%17, i%17)
	}
	if i%5 == 0 {
		fmt.Fprintf(&b, `,"user_id":"u%d"`, i%100)
	}
	fmt.Fprintf(&b, `,"anonymous_id":"a%d","session_id":"s%d"`, i%1000, i%300)
	ts := base.Add(time.Duration(i) * 1500 * time.Millisecond)
	if i%2 == 0 {
		fmt.Fprintf(&b, `,"ts":%q`, ts.Format(time.RFC3339Nano))
	} else {
		fmt.Fprintf(&b, `,"ts":%d`, ts.UnixMilli())
	}
	if i%7 != 3 {
		fmt.Fprintf(&b, `,"received_at":%q`, ts.Add(40*time.Millisecond).Format(time.RFC3339Nano))
	}
	fmt.Fprintf(&b, `,"ip":"203.0.113.%d","user_agent":"Mozilla/5.0 (X11; Linux x86_64) test/%d"`, i%256, i%3)
	if i%3 == 0 {
		fmt.Fprintf(&b, `,"properties":{"price":%d.5,"tags":["a","b"]}`, i)
	}
	if i%6 == 0 {
		b.WriteString(`,"plan":"pro"`)
	}
	b.WriteString("}")
	return b.String()
}

func writeFile(t testing.TB, schema *schemas.Schema, opts Options, events []string) (string, *Writer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "part-0-0.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, schema, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range events {
		if err := w.Append([]byte(e), base); err != nil {
			t.Fatalf("event %d %s: %v", i, e, err)
		}
	}
	w.SetSource("clicks", 3, 100, 100+int64(len(events))-1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, w
}

func strp(r *schemas.Row, name string) *string {
	if v, ok := r.Get(name).(string); ok {
		return &v
	}
	return nil
}

func microsp(r *schemas.Row, name string) *int64 {
	if v, ok := r.Get(name).(time.Time); ok {
		m := v.UnixMicro()
		return &m
	}
	return nil
}

func TestClickRoundTrip(t *testing.T) {
	const n = 1000
	events := make([]string, n)
	for i := range events {
		events[i] = clickEvent(i)
	}
	path, w := writeFile(t, schemas.Click, Options{RowGroupRows: 300}, events)
	if w.Rows() != n {
		t.Fatalf("Rows() = %d", w.Rows())
	}
	rows, err := ReadRows[parquettest.ClickRow](path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n {
		t.Fatalf("read %d rows, want %d", len(rows), n)
	}
	r := schemas.Click.NewRow()
	for i, got := range rows {
		if err := r.Decode([]byte(events[i])); err != nil {
			t.Fatal(err)
		}
		want := parquettest.ClickRow{
			EventID: strp(r, "event_id"), Type: r.Get("type").(string), URL: strp(r, "url"),
			Referrer: strp(r, "referrer"), Title: strp(r, "title"), AnonymousID: strp(r, "anonymous_id"),
			UserID: strp(r, "user_id"), SessionID: strp(r, "session_id"), TS: microsp(r, "ts"),
			ReceivedAt: microsp(r, "received_at"), IP: strp(r, "ip"), UserAgent: strp(r, "user_agent"),
			Properties: strp(r, "properties"),
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("row %d:\n got %s\nwant %s", i, show(got), show(want))
		}
	}
	// Spot checks that do not go through the decoder.
	if *rows[6].Properties != `{"price":6.5,"tags":["a","b"],"plan":"pro"}` {
		t.Errorf("row 6 properties %s", *rows[6].Properties)
	}
	if *rows[1].TS != base.Add(1500*time.Millisecond).UnixMicro() || rows[1].Type != "click" {
		t.Errorf("row 1 ts %d type %s", *rows[1].TS, rows[1].Type)
	}

	info, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Rows != n || len(info.RowGroups) != 4 || info.Codec != "SNAPPY" {
		t.Errorf("inspect: rows %d groups %d codec %s", info.Rows, len(info.RowGroups), info.Codec)
	}
	if info.Schema != "click" || info.SchemaVersion != schemas.Click.Version || info.Metadata[MetaTopic] != "clicks" ||
		info.Metadata[MetaPartition] != "3" || info.Metadata[MetaFirstOffset] != "100" || info.Metadata[MetaLastOffset] != "1099" {
		t.Errorf("inspect metadata %v", info.Metadata)
	}
	wantMax := base.Add(time.Duration(n-1) * 1500 * time.Millisecond)
	if !info.HasTime || !info.MinTime.Equal(base) || !info.MaxTime.Equal(wantMax) {
		t.Errorf("time range %v %v..%v, want %v..%v", info.HasTime, info.MinTime, info.MaxTime, base, wantMax)
	}
	if lo, hi := w.TimeRange(); !lo.Equal(base) || !hi.Equal(wantMax) {
		t.Errorf("writer time range %v..%v", lo, hi)
	}
	dict := map[string]bool{}
	for _, c := range info.Columns {
		dict[c.Path] = c.Dictionary
	}
	if !dict["type"] || !dict["user_agent"] || dict["event_id"] || dict["ts"] || dict["properties"] {
		t.Errorf("dictionary encoding per column: %v", dict)
	}
	var text bytes.Buffer
	if err := info.WriteText(&text); err != nil || !strings.Contains(text.String(), "rows: 1000") ||
		!strings.Contains(text.String(), "ts: min 2024-05-01T10:00:00Z") {
		t.Errorf("WriteText: %v\n%s", err, text.String())
	}
}

// TestManyPagesRoundTrip reads back, with the independent reader, column
// chunks of many data pages (snappy's pages are 64 KiB), with both codecs.
func TestManyPagesRoundTrip(t *testing.T) {
	const n = 30_000
	events := make([]string, n)
	for i := range events {
		events[i] = clickEvent(i)
	}
	for _, codec := range []string{"snappy", "zstd"} {
		path, _ := writeFile(t, schemas.Click, Options{Compression: codec}, events)
		rows, err := ReadRows[parquettest.ClickRow](path)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != n {
			t.Fatalf("%s: read %d rows, want %d", codec, len(rows), n)
		}
		r := schemas.Click.NewRow()
		for i, got := range rows {
			if err := r.Decode([]byte(events[i])); err != nil {
				t.Fatal(err)
			}
			if *got.EventID != *strp(r, "event_id") || !reflect.DeepEqual(got.Properties, strp(r, "properties")) ||
				!reflect.DeepEqual(got.TS, microsp(r, "ts")) {
				t.Fatalf("%s: row %d: %s", codec, i, show(got))
			}
		}
		info, err := Inspect(path)
		if err != nil {
			t.Fatal(err)
		}
		wantMax := base.Add(time.Duration(n-1) * 1500 * time.Millisecond)
		if info.Rows != n || !info.MinTime.Equal(base) || !info.MaxTime.Equal(wantMax) {
			t.Errorf("%s: inspect rows %d time %v..%v", codec, info.Rows, info.MinTime, info.MaxTime)
		}
	}
}

func show(v any) string {
	rv := reflect.ValueOf(v)
	var b strings.Builder
	for i := 0; i < rv.NumField(); i++ {
		f := rv.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			f = f.Elem()
		}
		fmt.Fprintf(&b, "%s=%v ", rv.Type().Field(i).Name, f)
	}
	return b.String()
}

func TestLogAndMetricRoundTrip(t *testing.T) {
	logs := []string{
		`{"event_id":"00000000000000000000000000000001","ts":"2024-05-01T10:00:00.5Z","host":"web-1","source":"/var/log/app.log","offset":0,"line":"hello","truncated":false,"invalid_utf8":false,"fields":{"env":"prod","team":"core"}}`,
		`{"event_id":"00000000000000000000000000000002","ts":"2024-05-01T10:00:01Z","source":"/var/log/app.log","offset":6,"line":"","fields":{}}`,
		`{"event_id":"00000000000000000000000000000003","ts":"2024-05-01T09:59:59Z","host":"web-2","source":"/x","offset":9007199254740993,"line":"l\tx","truncated":true,"pid":7}`,
	}
	path, _ := writeFile(t, schemas.Log, Options{Compression: "snappy"}, logs)
	rows, err := ReadRows[parquettest.LogRow](path)
	if err != nil {
		t.Fatal(err)
	}
	host1, yes, no := "web-1", true, false
	want0 := parquettest.LogRow{EventID: "00000000000000000000000000000001", TS: base.Add(500 * time.Millisecond).UnixMicro(),
		Host: &host1, Source: "/var/log/app.log", Offset: 0, Line: "hello", Truncated: &no, InvalidUTF8: &no,
		Fields: map[string]string{"env": "prod", "team": "core"}}
	if len(rows) != 3 || !reflect.DeepEqual(rows[0], want0) {
		t.Fatalf("rows %d, row 0 %s", len(rows), show(rows[0]))
	}
	if rows[1].Host != nil || rows[1].Truncated != nil || len(rows[1].Fields) != 0 {
		t.Errorf("row 1 optional values: %s", show(rows[1]))
	}
	if rows[2].Offset != 9007199254740993 || rows[2].Line != "l\tx" || *rows[2].Truncated != yes ||
		rows[2].Fields != nil || *rows[2].Extra != `{"pid":7}` {
		t.Errorf("row 2: %s", show(rows[2]))
	}
	info, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Codec != "SNAPPY" || !info.MinTime.Equal(base.Add(-time.Second)) || !info.MaxTime.Equal(base.Add(time.Second)) {
		t.Errorf("codec %s time %v..%v", info.Codec, info.MinTime, info.MaxTime)
	}

	metrics := []string{
		`{"name":"http_requests_total","kind":"counter","value":12.5,"labels":{"code":"200","method":"GET"},"ts":"2024-05-01T10:00:00Z","source":"web-1:beacon"}`,
		`{"name":"up","kind":"gauge","value":"+Inf","ts":"2024-05-01T10:00:10Z"}`,
	}
	path, _ = writeFile(t, schemas.Metric, Options{}, metrics)
	mrows, err := ReadRows[parquettest.MetricRow](path)
	if err != nil {
		t.Fatal(err)
	}
	src := "web-1:beacon"
	wantM := parquettest.MetricRow{Name: "http_requests_total", Kind: "counter", Value: 12.5,
		Labels: map[string]string{"code": "200", "method": "GET"}, TS: base.UnixMicro(), Source: &src}
	if len(mrows) != 2 || !reflect.DeepEqual(mrows[0], wantM) || mrows[1].Value <= 1e308 || mrows[1].Labels != nil {
		t.Errorf("metric rows: %s / %s", show(mrows[0]), show(mrows[1]))
	}
}

func TestAppendRejectsInvalidAndContinues(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, schemas.Click, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]byte(`{"type":"click"}`), base); err != nil {
		t.Fatal(err)
	}
	err = w.Append([]byte(`{"url":"x"}`), base)
	var ve *schemas.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, schemas.ErrMissingField) {
		t.Fatalf("invalid event: %v", err)
	}
	if err := w.Append([]byte(`{"type":"page_view"}`), base.Add(time.Hour)); err != nil {
		t.Fatalf("writer did not continue after a bad event: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Rows() != 2 || int64(buf.Len()) != w.Bytes() {
		t.Errorf("rows %d, bytes %d vs %d written", w.Rows(), w.Bytes(), buf.Len())
	}
	if lo, hi := w.TimeRange(); !lo.Equal(base) || !hi.Equal(base.Add(time.Hour)) {
		t.Errorf("record time fallback: %v..%v", lo, hi)
	}
	if err := w.Append([]byte(`{"type":"x"}`), base); err == nil {
		t.Error("append after close accepted")
	}
	row := schemas.Log.NewRow()
	w2, _ := NewWriter(&bytes.Buffer{}, schemas.Click, Options{})
	if err := w2.AppendRow(row, base); err == nil {
		t.Error("row of another schema accepted")
	}
}

// failingWriter fails every write after the first n bytes.
type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, errors.New("disk full")
	}
	f.n -= len(p)
	return len(p), nil
}

func TestWriteErrorsAreSticky(t *testing.T) {
	w, err := NewWriter(&failingWriter{n: 10}, schemas.Click, Options{RowGroupRows: 10})
	if err != nil {
		t.Fatal(err)
	}
	var first error
	for i := 0; i < 50 && first == nil; i++ {
		first = w.Append([]byte(clickEvent(i)), base)
	}
	if first == nil {
		t.Fatal("no write error surfaced")
	}
	if err := w.Append([]byte(clickEvent(0)), base); err == nil {
		t.Error("append after a write failure accepted")
	}
	if err := w.Close(); err == nil {
		t.Error("close after a write failure reported success")
	}
}

func TestRowGroupsBoundedByBytes(t *testing.T) {
	events := make([]string, 400)
	for i := range events {
		events[i] = clickEvent(i)
	}
	path, _ := writeFile(t, schemas.Click, Options{RowGroupBytes: 16 << 10}, events)
	info, err := Inspect(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for _, rg := range info.RowGroups {
		rows += rg.Rows
	}
	if len(info.RowGroups) < 4 || rows != 400 {
		t.Errorf("%d row groups holding %d rows; want several holding 400", len(info.RowGroups), rows)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{Compression: "gzip"}, {RowGroupRows: -1}, {RowGroupBytes: -5}} {
		if _, err := NewWriter(&bytes.Buffer{}, schemas.Click, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestInspectRejectsGarbage(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"empty.parquet": "",
		"text.parquet":  "this is not a parquet file at all, just text",
		"magic.parquet": "PAR1\xff\xff\xff\x7fPAR1",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Inspect(p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := ReadRows[parquettest.ClickRow](filepath.Join(dir, "text.parquet")); err == nil {
		t.Error("ReadRows on garbage: no error")
	}
}

func TestInspectDir(t *testing.T) {
	path, _ := writeFile(t, schemas.Click, Options{}, []string{clickEvent(1)})
	dir := filepath.Dir(path)
	if err := os.WriteFile(filepath.Join(dir, ".tmp-part-0-5.parquet-x"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	infos, err := InspectDir(dir)
	if err != nil || len(infos) != 1 || infos[0].Rows != 1 {
		t.Fatalf("InspectDir: %v %d", err, len(infos))
	}
}
