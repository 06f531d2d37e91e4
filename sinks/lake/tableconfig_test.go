package lake

import (
	"strings"
	"testing"
)

// TestTableConfigValidate: format iceberg's settings are checked, each
// mistake with a sentence naming the key, and hive configurations are not
// affected by them.
func TestTableConfigValidate(t *testing.T) {
	t.Parallel()
	base := func(mod func(*Config)) Config {
		c := Config{Brokers: []string{"127.0.0.1:9092"}, Group: "g", Topics: []string{"clicks"}, Schema: "click",
			Format: FormatIceberg, Iceberg: TableConfig{Warehouse: "/lake"}}
		mod(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // "" for valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"hive ignores iceberg", func(c *Config) { c.Format, c.Iceberg = "", TableConfig{Catalog: "oracle"} }, ""},
		{"day", func(c *Config) { c.Iceberg.Partition = "day" }, ""},
		{"none", func(c *Config) { c.Iceberg.Partition = "none" }, ""},
		{"file url", func(c *Config) { c.Iceberg.Warehouse = "file:///lake" }, ""},
		{"postgres", func(c *Config) { c.Iceberg.Catalog, c.Iceberg.URI = "postgres", "postgres://u@127.0.0.1/db" }, ""},
		{"format", func(c *Config) { c.Format = "delta" }, `format "delta": want hive or iceberg`},
		{"catalog", func(c *Config) { c.Iceberg.Catalog = "glue" }, `iceberg.catalog "glue": want sqlite, postgres or rest`},
		{"rest without uri", func(c *Config) { c.Iceberg.Catalog = "rest" }, "the rest catalog needs a URL"},
		{"sqlite url", func(c *Config) { c.Iceberg.URI = "postgres://x" }, "the sqlite catalog takes a file path"},
		{"no warehouse", func(c *Config) { c.Iceberg.Warehouse = "" }, "iceberg.warehouse: the directory"},
		{"s3 warehouse", func(c *Config) { c.Iceberg.Warehouse, c.Iceberg.URI = "s3://b/p", "/var/lib/c.db" }, ""},
		{"s3 postgres", func(c *Config) {
			c.Iceberg.Warehouse, c.Iceberg.Catalog, c.Iceberg.URI = "s3://b", "postgres", "postgres://u@127.0.0.1/db"
		}, ""},
		{"s3 sqlite without a file", func(c *Config) { c.Iceberg.Warehouse = "s3://b/p" }, "the sqlite catalog of a warehouse in S3 (s3://b/p) needs a local file"},
		{"s3 no bucket", func(c *Config) { c.Iceberg.Warehouse, c.Iceberg.URI = "s3:///p", "/c.db" }, "no bucket"},
		{"relative warehouse", func(c *Config) { c.Iceberg.Warehouse = "lake" }, "want an absolute directory (file:///PATH) or s3://BUCKET/PREFIX"},
		{"other scheme", func(c *Config) { c.Iceberg.Warehouse = "gs://b/p" }, "want an absolute directory"},
		{"partition", func(c *Config) { c.Iceberg.Partition = "month" }, `iceberg.partition "month": want hour, day, identity:<field> or none`},
		{"identity", func(c *Config) { c.Iceberg.Partition = "identity:type" }, ""},
		{"identity without a field", func(c *Config) { c.Iceberg.Partition = "identity" }, `iceberg.partition "identity": want identity:<field>`},
		{"identity on no field", func(c *Config) { c.Iceberg.Partition = "identity:campaign" }, `schema click has no field "campaign"`},
		{"identity on a map", func(c *Config) { c.Iceberg.Partition = "identity:properties" }, `field "properties" is a`},
		{"identity on a declared field", func(c *Config) { c.Fields, c.Iceberg.Partition = []string{"campaign:string"}, "identity:campaign" }, ""},
		{"namespace", func(c *Config) { c.Iceberg.Namespace = "a.b" }, `iceberg.namespace "a.b"`},
		{"partition_by", func(c *Config) { c.PartitionBy = "day" }, "follow the table's partition spec"},
		{"timestamp_field", func(c *Config) { c.Fields, c.TimestampField = []string{"seen:timestamp"}, "seen" },
			"partitioned by the schema's time field"},
	} {
		err := base(tc.mod).Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	// The table's spec picks the files' buckets; no _SUCCESS markers.
	c := base(func(c *Config) { c.Iceberg.Partition = "day" }).withDefaults()
	if c.PartitionBy != "day" || c.SuccessGrace >= 0 {
		t.Errorf("iceberg defaults: partition_by %q, success_grace %v", c.PartitionBy, c.SuccessGrace)
	}
}
