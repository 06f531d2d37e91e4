package schemas

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// clickV2 models the next click version: one optional field appended.
func clickV2(t testing.TB) *Schema {
	fields := append(append([]Field(nil), Click.Fields...),
		Field{Name: "screen", Type: TypeString, Since: Click.Version + 1, Doc: "screen size"})
	s, err := New("click", Click.Version+1, "ts", fields)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBuiltinSchemas(t *testing.T) {
	for _, s := range All() {
		if got, err := ByName(s.Name); err != nil || got != s {
			t.Errorf("ByName(%q) = %v, %v", s.Name, got, err)
		}
		md := s.Arrow().Metadata()
		if v, _ := md.GetValue(MetaSchemaName); v != s.Name {
			t.Errorf("%s: arrow metadata name %q", s.Name, v)
		}
		if s.CatchAll() == "" && !IsOTLP(s) { // OTLP rows are built from pdata, never folded
			t.Errorf("%s has no catch-all column", s.Name)
		}
		for i, f := range s.Fields {
			af := s.Arrow().Field(i)
			if af.Name != f.Name || af.Nullable == f.Required {
				t.Errorf("%s.%s: arrow field %v does not match", s.Name, f.Name, af)
			}
			if f.Doc == "" {
				t.Errorf("%s.%s has no doc", s.Name, f.Name)
			}
		}
		tf, _ := s.Field(s.TimeField)
		if !arrow.TypeEqual(tf.ArrowType(), TimestampType) {
			t.Errorf("%s: time field type %v", s.Name, tf.ArrowType())
		}
	}
	if _, err := ByName("nope"); err == nil {
		t.Error("ByName accepted an unknown schema")
	}
}

func TestNewRejects(t *testing.T) {
	ts := Field{Name: "ts", Type: TypeTimestamp, Since: 1}
	cases := map[string][]Field{
		"duplicate":         {ts, ts},
		"no time field":     {{Name: "a", Type: TypeString, Since: 1}},
		"two catch-alls":    {ts, {Name: "a", Type: TypeJSON, CatchAll: true, Since: 1}, {Name: "b", Type: TypeJSON, CatchAll: true, Since: 1}},
		"catch-all string":  {ts, {Name: "a", Type: TypeString, CatchAll: true, Since: 1}},
		"future field":      {ts, {Name: "a", Type: TypeString, Since: 3}},
		"enum on a number":  {ts, {Name: "a", Type: TypeInt64, Enum: []string{"x"}, Since: 1}},
		"unknown type":      {ts, {Name: "a", Type: 99, Since: 1}},
		"required catchall": {ts, {Name: "a", Type: TypeJSON, Required: true, CatchAll: true, Since: 1}},
	}
	for name, fields := range cases {
		if _, err := New("x", 1, "ts", fields); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheckEvolution(t *testing.T) {
	v2 := clickV2(t)
	if err := CheckEvolution(Click, v2); err != nil {
		t.Fatalf("adding an optional field: %v", err)
	}
	mutate := func(version int, edit func([]Field) []Field) *Schema {
		fields := edit(append([]Field(nil), v2.Fields...))
		s, err := New("click", version, "ts", fields)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	bad := map[string]*Schema{
		"same version": mutate(Click.Version, func(f []Field) []Field { f[len(f)-1].Since = Click.Version; return f }),
		"required new field": mutate(Click.Version+1, func(f []Field) []Field {
			f[len(f)-1].Required = true
			return f
		}),
		"type change": mutate(Click.Version+1, func(f []Field) []Field { f[1].Type, f[1].MaxBytes = TypeJSON, 0; return f }),
		"reorder": mutate(Click.Version+1, func(f []Field) []Field {
			f[1], f[2] = f[2], f[1]
			return f
		}),
		"removal":       mutate(Click.Version+1, func(f []Field) []Field { return append(f[:2:2], f[3:]...) }),
		"made required": mutate(Click.Version+1, func(f []Field) []Field { f[2].Required = true; return f }),
	}
	for name, next := range bad {
		if err := CheckEvolution(Click, next); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := CheckEvolution(Click, Log); err == nil || !strings.Contains(err.Error(), "different") {
		t.Errorf("different schemas: %v", err)
	}
}

// Click version 2 added client_ts to version 1 as the rules allow, so files
// and events of version 1 stay readable.
func TestClickV1ToV2(t *testing.T) {
	var v1Fields []Field
	for _, f := range Click.Fields {
		if f.Since == 1 {
			v1Fields = append(v1Fields, f)
		}
	}
	v1, err := New("click", 1, "ts", v1Fields)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckEvolution(v1, Click); err != nil {
		t.Fatal(err)
	}
	if f, ok := Click.Field("client_ts"); !ok || f.Since != 2 || f.Required || f.Type != TypeTimestamp || Click.Version != 2 {
		t.Fatalf("client_ts %+v, version %d", f, Click.Version)
	}
	if v1.Fingerprint() == Click.Fingerprint() {
		t.Fatal("v1 and v2 share a fingerprint")
	}
	r := mustDecode(t, Click, `{"type":"click","ts":1714558830123}`)
	if r.Get("client_ts") != nil {
		t.Fatalf("an event without client_ts decodes to %v", r.Get("client_ts"))
	}
}

// TestEvolutionDecoding: an old producer's event on a new sink gets a null for
// the new field; a new producer's event on an old sink keeps the new field in
// properties.
func TestEvolutionDecoding(t *testing.T) {
	v2 := clickV2(t)
	oldEvent := `{"type":"click","url":"u"}`
	newEvent := `{"type":"click","url":"u","screen":"1920x1080"}`
	r := mustDecode(t, v2, oldEvent)
	if r.Get("screen") != nil {
		t.Errorf("old event on v2: screen = %v", r.Get("screen"))
	}
	r = mustDecode(t, v2, newEvent)
	if r.Get("screen") != "1920x1080" || r.Get("properties") != nil {
		t.Errorf("new event on v2: screen %v properties %v", r.Get("screen"), r.Get("properties"))
	}
	r = mustDecode(t, Click, newEvent)
	if r.Get("properties") != `{"screen":"1920x1080"}` {
		t.Errorf("new event on v1: properties %v", r.Get("properties"))
	}
}

func TestBuilder(t *testing.T) {
	b := Log.NewBuilder(memory.NewGoAllocator())
	defer b.Release()
	rows := []string{
		`{"event_id":"a","ts":"2024-05-01T10:20:30Z","host":"h","source":"/x","offset":1,"line":"one","fields":{"env":"prod","dc":"eu"}}`,
		`{"event_id":"b","ts":1714558830000,"source":"/x","offset":5,"line":"two","truncated":true,"z":1}`,
	}
	r := Log.NewRow()
	for _, in := range rows {
		if err := r.Decode([]byte(in)); err != nil {
			t.Fatal(err)
		}
		b.Append(r)
	}
	if b.Len() != 2 || b.Bytes() <= 0 {
		t.Fatalf("Len %d Bytes %d", b.Len(), b.Bytes())
	}
	rec := b.NewRecord()
	defer rec.Release()
	if b.Len() != 0 || rec.NumRows() != 2 || !rec.Schema().Equal(Log.Arrow()) {
		t.Fatalf("record rows %d schema %v", rec.NumRows(), rec.Schema())
	}
	col := func(name string) arrow.Array { return rec.Column(Log.FieldIndex(name)) }
	if s := col("line").(*array.String); s.Value(0) != "one" || s.Value(1) != "two" {
		t.Errorf("line column %v", s)
	}
	if h := col("host"); !h.IsNull(1) || h.IsNull(0) {
		t.Errorf("host nulls wrong: %v", h)
	}
	if ts := col("ts").(*array.Timestamp); ts.Value(1) != arrow.Timestamp(1714558830000000) {
		t.Errorf("ts %v", ts.Value(1))
	}
	m := col("fields").(*array.Map)
	if !m.IsNull(1) || m.IsNull(0) {
		t.Errorf("fields nulls wrong")
	}
	start, end := m.ValueOffsets(0)
	keys := m.Keys().(*array.String)
	if end-start != 2 || keys.Value(int(start)) != "env" {
		t.Errorf("fields entries %d..%d", start, end)
	}
	if e := col("extra").(*array.String); e.Value(1) != `{"z":1}` || !e.IsNull(0) {
		t.Errorf("extra column %v", e)
	}
}
