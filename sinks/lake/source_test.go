package lake

import (
	"encoding/json"
	"testing"

	"millrace/audit"
)

// TestRowSourceIsSourceOf: the sink counts a row (landed or dropped as a
// repeat) under rowSource, which keeps the last key while a row's fields
// repeat, and a dead letter under audit.SourceOf of its fields; both give
// the key the agents count under, in any order of rows. A log line without
// a source path is NoSource ("-") on every side, never "host:".
func TestRowSourceIsSourceOf(t *testing.T) {
	for schema, events := range map[string][]string{
		"log": {
			`{"event_id":"a","ts":"2024-05-01T10:00:00Z","host":"web1","source":"/var/log/a.log","line":"x","offset":1}`,
			`{"event_id":"b","ts":"2024-05-01T10:00:00Z","host":"web1","source":"","line":"x","offset":1}`,
			`{"event_id":"d","ts":"2024-05-01T10:00:00Z","host":"","source":"/var/log/a.log","line":"x","offset":1}`,
			`{"event_id":"e","ts":"2024-05-01T10:00:00Z","host":"web1","source":"/var/log/a.log","line":"x","offset":1}`,
			`{"event_id":"f","ts":"2024-05-01T10:00:00Z","host":"web2","source":"/var/log/a.log","line":"x","offset":1}`,
		},
		"click": {
			`{"event_id":"a","type":"click","url":"https://Shop.example:8443/cart"}`,
			`{"event_id":"b","type":"click","url":"https://shop.example/x"}`,
			`{"event_id":"c","type":"click"}`,
			`{"event_id":"d","type":"click","url":"/relative"}`,
			`{"event_id":"e","type":"click","url":"https://other.example"}`,
		},
		"metric": {
			`{"name":"q","kind":"gauge","value":1,"ts":"2024-05-01T10:00:00Z","source":"node-7"}`,
			`{"name":"q","kind":"gauge","value":1,"ts":"2024-05-01T10:00:00Z"}`,
			`{"name":"q","kind":"gauge","value":1,"ts":"2024-05-01T10:00:00Z","source":"node-7"}`,
		},
	} {
		w, _, _ := testWorker(t, t.TempDir(), func(c *Config) { c.Schema = schema })
		p := w.partitionLocked(topicPartition{"clicks", 0})
		for _, e := range events {
			if err := p.row.Decode([]byte(e)); err != nil {
				t.Fatalf("%s: %s: %v", schema, e, err)
			}
			var fields map[string]any
			if err := json.Unmarshal([]byte(e), &fields); err != nil {
				t.Fatal(err)
			}
			want := audit.SourceOf(schema, func(name string) string { s, _ := fields[name].(string); return s })
			if got := w.rowSource(p, p.row); got != want {
				t.Errorf("%s: %s: row source %q, audit.SourceOf %q", schema, e, got, want)
			}
		}
	}
	w, _, _ := testWorker(t, t.TempDir(), func(c *Config) { c.Schema = "log" })
	p := w.partitionLocked(topicPartition{"clicks", 0})
	if err := p.row.Decode([]byte(`{"event_id":"b","ts":"2024-05-01T10:00:00Z","host":"web1","source":"","line":"x","offset":1}`)); err != nil {
		t.Fatal(err)
	}
	if got := w.rowSource(p, p.row); got != audit.NoSource {
		t.Errorf("a log line without a source path counts under %q, want %q", got, audit.NoSource)
	}
}
