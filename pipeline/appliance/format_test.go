package appliance

import (
	"reflect"
	"testing"

	"millrace/sinks/iceberg"
	"millrace/sinks/lake"
)

// TestSinkFormatDefault: a sink of `millrace up` lands Iceberg tables
// unless its config says format: hive; an s3:// out and a sink with a
// timestamp_field (a Hive layout setting) stay Hive; partition_by: day
// becomes the tables' day spec.
func TestSinkFormatDefault(t *testing.T) {
	c := decodeConfig(t, `
sinks:
  - {name: plain, out: lake, topics: [a], schema: click}
  - {name: hive, out: lake, topics: [b], schema: click, format: hive}
  - {name: s3, out: "s3://bucket/lake", topics: [c], schema: click}
  - {name: daily, out: lake, topics: [d], schema: click, partition_by: day}
  - {name: stamped, out: lake, topics: [e], schema: log, timestamp_field: ts}
  - {name: explicit, out: lake, topics: [f], schema: click, format: iceberg, iceberg: {partition: none}}
`).withDefaults()
	want := []struct{ format, partition, partitionBy string }{
		{lake.FormatIceberg, "", ""},
		{lake.FormatHive, "", ""},
		{"", "", ""},
		{lake.FormatIceberg, "day", ""},
		{"", "", ""},
		{lake.FormatIceberg, "none", ""},
	}
	for i, s := range c.Sinks {
		if s.Format != want[i].format || s.Iceberg.Partition != want[i].partition || s.PartitionBy != want[i].partitionBy {
			t.Errorf("sink %s: format %q, iceberg.partition %q, partition_by %q; want %+v", s.Name, s.Format, s.Iceberg.Partition, s.PartitionBy, want[i])
		}
	}
	if err := c.Validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

// TestSinksNameTheirTables: what `millrace up` prints of its sinks names a
// table sink's tables and catalog, and nothing of them for a Hive sink.
func TestSinksNameTheirTables(t *testing.T) {
	c := decodeConfig(t, `
data: /srv/m
sinks:
  - {name: clicks, out: lake, topics: [clicks, views], schema: click}
  - {name: logs, out: lake, topics: [logs], schema: log, iceberg: {namespace: ops, uri: /srv/cat.db}}
  - {name: old, out: old, topics: [old], schema: click, format: hive}
`).withDefaults()
	got := (&Appliance{cfg: c}).Sinks()
	want := []SinkInfo{
		{Name: "clicks", Out: "/srv/m/lake", Tables: []string{"millrace.clicks", "millrace.views"}, Catalog: "/srv/m/lake/catalog.db"},
		{Name: "logs", Out: "/srv/m/lake", Tables: []string{"ops.logs"}, Catalog: "/srv/cat.db"},
		{Name: "old", Out: "/srv/m/old"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sinks %+v, want %+v", got, want)
	}
}

// TestTablesOfASink: the console finds a table sink's tables in the
// catalog and namespace the sink was given.
func TestTablesOfASink(t *testing.T) {
	c := decodeConfig(t, `
sinks:
  - {name: a, out: lake, topics: [a], schema: click}
  - {name: b, out: lake, topics: [b], schema: click, iceberg: {namespace: ops, uri: /srv/cat.db}}
  - {name: c, out: lake, topics: [c], schema: click, iceberg: {catalog: postgres, uri: "postgres://u:p@127.0.0.1/lake"}}
  - {name: d, out: lake, topics: [d], schema: click, format: hive}
`).withDefaults()
	want := []*iceberg.Config{
		{Directory: "/srv/lake"},
		{Namespace: "ops", Path: "/srv/cat.db", Directory: "/srv/lake"},
		{Catalog: "postgres", URL: "postgres://u:p@127.0.0.1/lake", Directory: "/srv/lake"},
		nil,
	}
	for i, sc := range c.Sinks {
		if got := tablesOf(sc, "file:///srv/lake"); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("sink %s: %+v, want %+v", sc.Name, got, want[i])
		}
	}
}
