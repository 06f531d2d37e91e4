package lake

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas/format"
	"millrace/schemas/format/avro"
	"millrace/schemas/format/jsonschema"
	"millrace/schemas/format/protobuf"
	"millrace/schemas/srclient"
	"millrace/sinks/parquet"
	"millrace/store"
)

// fakeSource is a SchemaSource over real Avro schemas, keyed by ID, as a
// registry client's cache would hold them.
type fakeSource struct {
	byID   map[int]format.Schema
	latest int   // the subject's latest ID
	down   error // when set, every Decode fails with it (the registry unreachable)
}

func (s *fakeSource) Decode(value []byte) (int, format.Schema, any, error) {
	if s.down != nil {
		return 0, nil, nil, s.down
	}
	id := int(binary.BigEndian.Uint32(value[1:5]))
	sc, ok := s.byID[id]
	if !ok {
		return id, nil, nil, fmt.Errorf("schema ID %d: %w", id, ErrUnknownSchema)
	}
	v, err := sc.Decode(value[5:])
	if err != nil {
		return id, nil, nil, fmt.Errorf("schema ID %d: %w: %v", id, ErrUndecodable, err)
	}
	return id, sc, v, nil
}

func (s *fakeSource) Latest(_ context.Context, subject string) (int, format.Schema, error) {
	if subject != "orders-value" {
		return 0, nil, fmt.Errorf("subject %q: %w", subject, ErrUnknownSchema)
	}
	return s.latest, s.byID[s.latest], nil
}

// The order schemas: 1, then 2 adding an optional coupon (a backward
// compatible change, Confluent's default level), then 3 turning amount
// into a string (a change only NONE allows).
const (
	orderFields = `{"name":"event_id","type":"string"},
		{"name":"amount","type":"double"},
		{"name":"items","type":"int"},
		{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"tags","type":{"type":"array","items":"string"}}`
	orderV1 = `{"type":"record","name":"Order","fields":[` + orderFields + `]}`
	orderV2 = `{"type":"record","name":"Order","fields":[` + orderFields + `,
		{"name":"coupon","type":["null","string"],"default":null}]}`
	orderV3 = `{"type":"record","name":"Order","fields":[{"name":"event_id","type":"string"},{"name":"amount","type":"string"},
		{"name":"channel","type":"string","default":"web"}]}`
)

func orderSource(t testing.TB) *fakeSource {
	t.Helper()
	src := &fakeSource{byID: map[int]format.Schema{}, latest: 1}
	for id, text := range map[int]string{1: orderV1, 2: orderV2, 3: orderV3} {
		s, err := avro.Type.Parse(text, nil, format.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		src.byID[id] = s
	}
	return src
}

// framed encodes value with schema id of src, Confluent's wire format.
func framed(t testing.TB, src *fakeSource, id int, value map[string]any) []byte {
	t.Helper()
	payload, err := src.byID[id].Encode(value)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), payload...)
}

// order is an order event at hour h after base.
func order(n int, h int) map[string]any {
	return map[string]any{"event_id": fmt.Sprintf("e%d", n), "amount": float64(n) + 0.5, "items": float64(n),
		"at": float64(base.Add(time.Duration(h) * time.Hour).UnixMilli()), "tags": []any{"a"}}
}

// registryLog is the test's topic: rows of schema 1, dead letters of every
// kind, then a row of schema 2 (which adds coupon) and one of schema 1.
func registryLog(t testing.TB, src *fakeSource) []*kgo.Record {
	withCoupon := order(4, 0)
	withCoupon["coupon"] = "SPRING"
	values := [][]byte{
		framed(t, src, 1, order(0, 0)),
		framed(t, src, 1, order(1, 0)),
		[]byte(`{"event_id":"e2"}`),                                        // JSON, not framed
		append(binary.BigEndian.AppendUint32([]byte{0}, 9), 2),             // an ID the registry does not know
		framed(t, src, 2, withCoupon),                                      // evolves: coupon
		framed(t, src, 3, map[string]any{"event_id": "e5", "amount": "1"}), // amount changes type, channel is new
		framed(t, src, 1, order(6, 0))[:8],                                 // cut short: undecodable
		framed(t, src, 1, order(7, 0)),
	}
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: "orders", Offset: int64(i), Value: v, Timestamp: base.Add(time.Duration(i) * time.Second)}
	}
	return recs
}

// registryWorker is a registry-typed worker of topic orders over a file
// store, its schema fixed as Start would.
func registryWorker(t testing.TB, root string, src *fakeSource, mod func(*Config)) *Worker {
	t.Helper()
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topics: []string{"orders"}, Schema: SchemaRegistry,
		Registry: RegistryConfig{Config: srclient.Config{URLs: []string{"http://127.0.0.1:1"}}}, Source: src, RollRows: 1000, IdleTimeout: time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	st, err := store.NewFile(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(cfg, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.fixSchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	return w
}

// feedOrders processes recs as partition 0 of orders delivers them.
func feedOrders(w *Worker, recs []*kgo.Record) error {
	w.landing.Lock()
	defer w.landing.Unlock()
	p := w.assign(topicPartition{"orders", 0})
	for _, r := range recs {
		if err := w.processRecord(context.Background(), p, r); err != nil {
			return err
		}
	}
	return nil
}

// orderRow is a row of an order file of schema 2 (every registry column
// optional, the record time required), as xitongsys/parquet-go reads it.
type orderRow struct {
	EventID    *string  `parquet:"name=event_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Amount     *float64 `parquet:"name=amount, type=DOUBLE, repetitiontype=OPTIONAL"`
	Items      *int64   `parquet:"name=items, type=INT64, repetitiontype=OPTIONAL"`
	At         *int64   `parquet:"name=at, type=INT64, repetitiontype=OPTIONAL"`
	Tags       *string  `parquet:"name=tags, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	RecordTime int64    `parquet:"name=_record_time, type=INT64"`
	Coupon     *string  `parquet:"name=coupon, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
}

// orderRowV1 is a row of an order file of schema 1.
type orderRowV1 struct {
	EventID    *string  `parquet:"name=event_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Amount     *float64 `parquet:"name=amount, type=DOUBLE, repetitiontype=OPTIONAL"`
	Items      *int64   `parquet:"name=items, type=INT64, repetitiontype=OPTIONAL"`
	At         *int64   `parquet:"name=at, type=INT64, repetitiontype=OPTIONAL"`
	Tags       *string  `parquet:"name=tags, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	RecordTime int64    `parquet:"name=_record_time, type=INT64"`
}

// TestRegistryHive: a registry-typed topic lands as typed columns; the
// first record of schema 2 lands the open window ("schema") and the files
// after it have its coupon column; a record that is not framed, one of an
// unknown ID, one whose schema changes a column's type and one that does
// not decode go to the dead letters with the reason (and the one whose
// schema changes a type adds none of its new columns).
func TestRegistryHive(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	src := orderSource(t)
	w := registryWorker(t, root, src, nil)
	c, d := &fakeCommitter{}, &fakeDeadLetters{}
	w.commit, w.dlq = c, d
	if err := feedOrders(w, registryLog(t, src)); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	if want := []string{"orders/0@4", "orders/0@8"}; !slices.Equal(c.log, want) {
		t.Errorf("commits %v, want %v (the evolution lands the window before offset 4)", c.log, want)
	}
	files, err := filepath.Glob(root + "/orders/dt=2024-05-01/hr=10/*.parquet")
	if err != nil || len(files) != 2 {
		t.Fatalf("files %v, %v; want two", files, err)
	}
	slices.Sort(files)
	first, err := parquet.ReadRows[orderRowV1](files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || *first[1].EventID != "e1" || *first[1].Amount != 1.5 || *first[1].Items != 1 ||
		*first[1].At != base.UnixMicro() || *first[1].Tags != `["a"]` || first[1].RecordTime != base.Add(time.Second).UnixMicro() {
		t.Errorf("rows of schema 1: %+v", first)
	}
	second, err := parquet.ReadRows[orderRow](files[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 2 || *second[0].EventID != "e4" || second[0].Coupon == nil || *second[0].Coupon != "SPRING" ||
		*second[1].EventID != "e7" || second[1].Coupon != nil {
		t.Errorf("rows after the evolution: %+v", second)
	}
	if w.schema.FieldIndex("channel") >= 0 {
		t.Error("the record whose amount changed type added its channel column")
	}
	want := map[int64]string{
		2: "not Confluent-framed",
		3: "schema ID 9: unknown schema",
		5: `schema ID 3: field "amount": the value's schema makes it string, which lands as string, and the table's column is number`,
		6: "schema ID 1: value does not decode with its schema",
	}
	if len(d.sent) != len(want) {
		t.Errorf("dead letters %+v, want offsets 2, 3, 5, 6", d.sent)
	}
	for _, l := range d.sent {
		if !strings.HasPrefix(l.Reason, want[l.Offset]) || want[l.Offset] == "" {
			t.Errorf("dead letter @%d: %q, want %q…", l.Offset, l.Reason, want[l.Offset])
		}
	}
}

// TestRegistryUnreachable: a registry that does not answer stops the
// worker; the record is not dead-lettered and nothing is committed.
func TestRegistryUnreachable(t *testing.T) {
	t.Parallel()
	src := orderSource(t)
	w := registryWorker(t, t.TempDir(), src, nil)
	c, d := &fakeCommitter{}, &fakeDeadLetters{}
	w.commit, w.dlq = c, d
	src.down = errors.New("dial tcp 127.0.0.1:8081: connection refused")
	err := feedOrders(w, registryLog(t, src)[:1])
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("feeding with the registry down: %v, want its error", err)
	}
	if len(d.sent) != 0 || len(c.log) != 0 {
		t.Errorf("dead letters %v, commits %v; want none", d.sent, c.log)
	}
}

// TestRegistryConfig: what a registry-typed sink needs, refused with the
// reason.
func TestRegistryConfig(t *testing.T) {
	t.Parallel()
	good := Config{Brokers: []string{"b:9092"}, Group: "g", Topics: []string{"orders"}, Schema: SchemaRegistry,
		Registry: RegistryConfig{Config: srclient.Config{URLs: []string{"http://registry:8081"}}}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Registry.URLs = []string{"registry:8081"} }, "must begin with http://"},
		{func(c *Config) { c.Topics = []string{"a", "b"} }, "one topic per sink"},
		{func(c *Config) { c.Fields = []string{"x:string"} }, "fields:"},
		{func(c *Config) { c.Registry.Password = "p" }, "a password needs a username"},
		{func(c *Config) { c.Schema, c.EventIDField = "click", "id" }, "event_id_field"},
	} {
		c := good
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", c, err, tc.want)
		}
	}
	// Without a Source, New connects the registry client of Registry.
	w, err := New(good, mustFileStore(t), nil, nil)
	if err != nil {
		t.Fatalf("New without a Source: %v", err)
	}
	if _, ok := w.cfg.Source.(*registryClient); !ok {
		t.Errorf("New without a Source gave the worker %T, want the registry client", w.cfg.Source)
	}
}

// TestRegistryIceberg: the same topic as an Iceberg table partitioned by
// the values' own time field: the table's schema evolves with coupon in
// the middle of the stream, the rows read back typed, and the dead
// letters are rows of orders~dlq.
func TestRegistryIceberg(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	src := orderSource(t)
	w := registryWorker(t, root, src, func(c *Config) {
		c.Format, c.Iceberg, c.TimestampField = FormatIceberg, TableConfig{Warehouse: root}, "at"
	})
	cat, tables, err := openTables(t.Context(), w.cfg, w.store, w.schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	w.commit = &tableCommitter{catalog: cat, group: "g", store: w.store, next: &fakeCommitter{},
		logger: slog.New(slog.DiscardHandler), tables: tables, from: map[topicPartition]int64{}}
	w.tables = cat
	if err := feedOrders(w, registryLog(t, src)); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	tbl, _ := readNamedTable(t, w.cfg, "orders")
	if _, ok := tbl.Schema().FindFieldByName("coupon"); !ok {
		t.Fatalf("the table's schema has no coupon: %v", tbl.Schema())
	}
	if _, ok := tbl.Schema().FindFieldByName("_record_time"); ok {
		t.Error("the table has _record_time though at is its time field")
	}
	_, batches, err := tbl.Scan(table.WithSelectedFields("event_id", "items", "coupon")).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			var cells []string
			for j := range int(rec.NumCols()) {
				cells = append(cells, rec.Column(j).ValueStr(i))
			}
			rows = append(rows, strings.Join(cells, " "))
		}
		rec.Release()
	}
	slices.Sort(rows)
	if want := []string{"e0 0 (null)", "e1 1 (null)", "e4 4 SPRING", "e7 7 (null)"}; !slices.Equal(rows, want) {
		t.Errorf("table rows %q, want %q", rows, want)
	}
	dlq, _ := readNamedTable(t, w.cfg, "orders~dlq")
	letters := scanDeadLetters(t, dlq)
	if len(letters) != 4 || !strings.Contains(letters[0], "orders/0@2") || !strings.Contains(letters[1], "unknown schema") {
		t.Errorf("dead-letter rows %q", letters)
	}
}

func mustFileStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.NewFile(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestRegistryDedupAndProtobuf: values written with a Protobuf schema
// (Confluent's message indexes before the message) land typed, and
// Dedup reads the event id from the configured field: the repeat of a
// UUID is dropped. A value of another message of the schema is a dead
// letter: the columns are the first message's.
func TestRegistryDedupAndProtobuf(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s, err := protobuf.Type.Parse(`syntax = "proto3";
import "google/protobuf/timestamp.proto";
message Payment { string order_id = 1; int64 cents = 2; google.protobuf.Timestamp at = 3; }
message Refund { string order_id = 1; }`, nil, format.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{byID: map[int]format.Schema{7: s}, latest: 7}
	w := registryWorker(t, root, src, func(c *Config) { c.EventIDField = "order_id" })
	c, d := &fakeCommitter{}, &fakeDeadLetters{}
	w.commit, w.dlq = c, d
	ids := []string{"0b5c1f64-7d4e-4b8a-9a57-2f1c3d4e5f60", "1b5c1f64-7d4e-4b8a-9a57-2f1c3d4e5f60", "0b5c1f64-7d4e-4b8a-9a57-2f1c3d4e5f60"}
	var recs []*kgo.Record
	for i, id := range ids {
		v := framed(t, src, 7, map[string]any{"order_id": id, "cents": float64(100 * i),
			"at": base.Add(5 * time.Microsecond).Format(time.RFC3339Nano)})
		recs = append(recs, &kgo.Record{Topic: "orders", Offset: int64(i), Value: v, Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	// A Refund: message indexes [1] (zigzag: count 1, index 1), then
	// field 1, a string of one byte.
	refund := append(binary.BigEndian.AppendUint32([]byte{0}, 7), 2, 2, 0x0a, 1, 'r')
	recs = append(recs, &kgo.Record{Topic: "orders", Offset: 3, Value: refund, Timestamp: base.Add(3 * time.Second)})
	if err := feedOrders(w, recs); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	type paymentRow struct {
		OrderID    *string `parquet:"name=order_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
		Cents      *int64  `parquet:"name=cents, type=INT64, repetitiontype=OPTIONAL"`
		At         *int64  `parquet:"name=at, type=INT64, repetitiontype=OPTIONAL"`
		RecordTime int64   `parquet:"name=_record_time, type=INT64"`
	}
	files, _ := filepath.Glob(root + "/orders/dt=*/hr=*/*.parquet")
	if len(files) != 1 {
		t.Fatalf("files %v, want one", files)
	}
	rows, err := parquet.ReadRows[paymentRow](files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || *rows[0].Cents != 0 || *rows[1].Cents != 100 || *rows[1].At != base.UnixMicro()+5 {
		t.Errorf("rows %+v: want the first two payments, the repeat dropped, the first with cents 0 (proto3 sends no zero)", rows)
	}
	if len(d.sent) != 1 || !strings.Contains(d.sent[0].Reason, "not of the schema's first message") || !slices.Equal(c.log, []string{"orders/0@4"}) {
		t.Errorf("dead letters %+v, commits %v; want the Refund dead-lettered", d.sent, c.log)
	}
}

// TestRegistryJSONSchema: values validated by a JSON Schema land typed,
// a date-time string as a timestamp that is the event time
// (timestamp_field), an object as its JSON text; a value the schema
// refuses is a dead letter.
func TestRegistryJSONSchema(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s, err := jsonschema.Type.Parse(`{"type":"object","required":["event_id","at"],"properties":{
		"event_id":{"type":"string"},"at":{"type":"string","format":"date-time"},
		"n":{"type":"integer"},"meta":{"type":"object"}}}`, nil, format.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{byID: map[int]format.Schema{4: s}, latest: 4}
	w := registryWorker(t, root, src, func(c *Config) { c.TimestampField = "at" })
	c, d := &fakeCommitter{}, &fakeDeadLetters{}
	w.commit, w.dlq = c, d
	header := binary.BigEndian.AppendUint32([]byte{0}, 4)
	values := []string{
		`{"event_id":"e0","at":"2024-05-01T13:30:00Z","n":3,"meta":{"k":[1,2]}}`,
		`{"event_id":"e1","n":4}`, // at is required
	}
	var recs []*kgo.Record
	for i, v := range values {
		recs = append(recs, &kgo.Record{Topic: "orders", Offset: int64(i), Value: append(slices.Clip(header), v...), Timestamp: base})
	}
	if err := feedOrders(w, recs); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	type row struct {
		At      *int64  `parquet:"name=at, type=INT64, repetitiontype=OPTIONAL"`
		EventID *string `parquet:"name=event_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
		Meta    *string `parquet:"name=meta, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
		N       *int64  `parquet:"name=n, type=INT64, repetitiontype=OPTIONAL"`
	}
	// Bucketed by at (13:00), not by the record time (10:00).
	files, _ := filepath.Glob(root + "/orders/dt=2024-05-01/hr=13/*.parquet")
	if len(files) != 1 {
		t.Fatalf("files in hour 13: %v, want one", files)
	}
	rows, err := parquet.ReadRows[row](files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || *rows[0].At != base.Add(3*time.Hour+30*time.Minute).UnixMicro() || *rows[0].Meta != `{"k":[1,2]}` || *rows[0].N != 3 {
		t.Errorf("rows %+v", rows)
	}
	if len(d.sent) != 1 || d.sent[0].Offset != 1 || !strings.Contains(d.sent[0].Reason, "value does not decode") {
		t.Errorf("dead letters %+v, want offset 1 refused by the schema", d.sent)
	}
}
