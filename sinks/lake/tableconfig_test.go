package lake

import (
	"os"
	"path/filepath"
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
		{"rest with a token", func(c *Config) {
			c.Iceberg.Catalog, c.Iceberg.URI, c.Iceberg.TokenFile = "rest", "http://127.0.0.1:8181", "/etc/millrace/token"
		}, ""},
		{"token for sqlite", func(c *Config) { c.Iceberg.TokenFile = "/etc/millrace/token" }, "iceberg.token_file: a token is for the rest catalog, not sqlite"},
		{"credential for sqlite", func(c *Config) { c.Iceberg.CredentialFile = "/etc/millrace/cred" }, "iceberg.credential_file: a credential is for the rest catalog, not sqlite"},
		{"token and credential", func(c *Config) {
			c.Iceberg.Catalog, c.Iceberg.URI = "rest", "http://127.0.0.1:8181"
			c.Iceberg.TokenFile, c.Iceberg.CredentialFile = "/etc/millrace/token", "/etc/millrace/cred"
		}, "token_file or credential_file, not both"},
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

// TestTableConfigToken: a rest catalog's token is read from token_file
// (trimmed of the file's newline) into the catalog's configuration; an
// unreadable file is an error naming the key.
func TestTableConfigToken(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tc := TableConfig{Catalog: "rest", URI: "http://127.0.0.1:8181", Warehouse: "/lake", TokenFile: file}
	cc, err := tc.catalogConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Token != "s3cret" || cc.URL != "http://127.0.0.1:8181" {
		t.Errorf("catalog config token %q, URL %q; want s3cret and the uri", cc.Token, cc.URL)
	}
	tc.TokenFile = filepath.Join(t.TempDir(), "missing")
	if _, err := tc.catalogConfig(nil, nil); err == nil || !strings.Contains(err.Error(), "iceberg.token_file") {
		t.Errorf("a missing token file: %v, want an error naming iceberg.token_file", err)
	}
}

// TestTableConfigCredential: a rest catalog's OAuth2 client credential is
// read from credential_file into the catalog's configuration.
func TestTableConfigCredential(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "credential")
	if err := os.WriteFile(file, []byte("millrace:s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tc := TableConfig{Catalog: "rest", URI: "http://127.0.0.1:8181", Warehouse: "/lake", CredentialFile: file}
	cc, err := tc.catalogConfig(nil, nil)
	if err != nil || cc.Credential != "millrace:s3cret" || cc.Token != "" {
		t.Errorf("catalog config credential %q, token %q, %v; want millrace:s3cret and no token", cc.Credential, cc.Token, err)
	}
}
