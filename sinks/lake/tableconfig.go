package lake

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"millrace/sinks/iceberg"
	"millrace/store"
)

// The formats a sink lands in (Config.Format).
const (
	// FormatHive is Hive-partitioned Parquet under the store's root (Layout):
	// the default, and what every existing configuration lands.
	FormatHive = "hive"
	// FormatIceberg is one Apache Iceberg table per topic (sinks/iceberg):
	// the same Parquet files, in the table's data directory, committed with
	// the table's snapshots (tablecommit.go).
	FormatIceberg = "iceberg"
)

// TableConfig is the catalog and table settings of Format iceberg, the
// iceberg: key next to format: iceberg.
type TableConfig struct {
	// Catalog is "sqlite" (default: an embedded SQLite file, no outside
	// service), "postgres" (the same catalog on PostgreSQL, for sink
	// processes on several hosts) or "rest" (an Iceberg REST catalog).
	Catalog string `yaml:"catalog"`
	// URI is the SQLite file (default <warehouse>/catalog.db), the
	// PostgreSQL URL (postgres://user:pw@host:5432/db), or the REST
	// catalog's base URL. Required for postgres and rest, and for sqlite
	// with a warehouse in S3 (the SQLite file is local).
	URI string `yaml:"uri"`
	// TokenFile is a file holding the bearer token a rest catalog
	// requires (the Authorization header of every request); none by
	// default. A file, not the token, so that the secret stays out of
	// configuration files and command lines.
	TokenFile string `yaml:"token_file"`
	// CredentialFile is a file holding a rest catalog's OAuth2 client
	// credential, "client_id:client_secret", which the sink exchanges at
	// the catalog's /v1/oauth/tokens for its bearer tokens; none by
	// default, and not with TokenFile.
	CredentialFile string `yaml:"credential_file"`
	// Warehouse is where the tables live, a directory (/PATH or
	// file:///PATH) or a bucket (s3://BUCKET/PREFIX): a topic's table is
	// <warehouse>/<namespace>.db/<topic>, its data files under its data/.
	// It must be where the sink's store writes (`millrace sink` sets it
	// from --out); a table in S3 is reached with the store's settings
	// (endpoint, region, credentials). Required.
	Warehouse string `yaml:"warehouse"`
	// Namespace holds one table per topic. Default "millrace".
	Namespace string `yaml:"namespace"`
	// Partition is the tables' partition spec: "hour" (default:
	// hour(<event time>)), "day", "identity:<field>" (the value of a
	// string, int64 or bool field of the schema; tablepartition.go), or
	// "none".
	Partition string `yaml:"partition"`
	// Maintenance is the tables' scheduled compaction, snapshot expiry and
	// orphan sweep (maintain.go); on by default.
	Maintenance MaintenanceConfig `yaml:"maintenance"`
}

// validate checks tc for a sink of schema time field timeField.
func (tc TableConfig) validate() []error {
	var errs []error
	switch tc.Catalog {
	case "", iceberg.CatalogSQLite:
		if strings.Contains(tc.URI, "://") {
			errs = append(errs, fmt.Errorf("lake: iceberg.uri %q: the sqlite catalog takes a file path", tc.URI))
		}
	case iceberg.CatalogPostgres, iceberg.CatalogREST:
		if tc.URI == "" {
			errs = append(errs, fmt.Errorf("lake: iceberg.uri: the %s catalog needs a URL", tc.Catalog))
		}
	default:
		errs = append(errs, fmt.Errorf("lake: iceberg.catalog %q: want sqlite, postgres or rest", tc.Catalog))
	}
	if tc.TokenFile != "" && tc.Catalog != iceberg.CatalogREST {
		errs = append(errs, fmt.Errorf("lake: iceberg.token_file: a token is for the rest catalog, not %s", cmp.Or(tc.Catalog, iceberg.CatalogSQLite)))
	}
	if tc.CredentialFile != "" && tc.Catalog != iceberg.CatalogREST {
		errs = append(errs, fmt.Errorf("lake: iceberg.credential_file: a credential is for the rest catalog, not %s", cmp.Or(tc.Catalog, iceberg.CatalogSQLite)))
	}
	if tc.CredentialFile != "" && tc.TokenFile != "" {
		errs = append(errs, errors.New("lake: iceberg: token_file or credential_file, not both"))
	}
	switch bucket, _, inS3 := tc.s3Warehouse(); {
	case tc.Warehouse == "":
		errs = append(errs, errors.New("lake: iceberg.warehouse: the directory or bucket that holds the tables (the sink's --out) is needed"))
	case inS3 && bucket == "":
		errs = append(errs, fmt.Errorf("lake: iceberg.warehouse %q: no bucket (s3://BUCKET/PREFIX)", tc.Warehouse))
	case inS3 && (tc.Catalog == "" || tc.Catalog == iceberg.CatalogSQLite) && tc.URI == "":
		errs = append(errs, fmt.Errorf("lake: iceberg.uri: the sqlite catalog of a warehouse in S3 (%s) needs a local file", tc.Warehouse))
	case inS3: // that it is the store's is checked when the worker starts (catalogConfig)
	case strings.Contains(tc.warehouseDir(), "://") || !filepath.IsAbs(tc.warehouseDir()):
		errs = append(errs, fmt.Errorf("lake: iceberg.warehouse %q: want an absolute directory (file:///PATH) or s3://BUCKET/PREFIX", tc.Warehouse))
	}
	if strings.ContainsAny(tc.Namespace, "./ ") {
		errs = append(errs, fmt.Errorf("lake: iceberg.namespace %q: want one name without dots, slashes or spaces", tc.Namespace))
	}
	switch p, field, _ := strings.Cut(tc.Partition, ":"); p {
	case "", string(iceberg.PartitionHour), string(iceberg.PartitionDay), string(iceberg.PartitionNone):
		if field != "" {
			errs = append(errs, fmt.Errorf("lake: iceberg.partition %q: only identity takes a field", tc.Partition))
		}
	case string(iceberg.PartitionIdentity):
		if field == "" {
			errs = append(errs, fmt.Errorf("lake: iceberg.partition %q: want identity:<field>", tc.Partition))
		}
	default:
		errs = append(errs, fmt.Errorf("lake: iceberg.partition %q: want hour, day, identity:<field> or none", tc.Partition))
	}
	errs = append(errs, tc.Maintenance.validate()...)
	return errs
}

// layout is the partition_by the table's spec needs: a data file holds one
// partition value, so a day-partitioned table takes day files, every other
// spec hour files. (An identity-partitioned table takes day files split by
// value: its spec does not care for time, and day files are fewer.)
func (tc TableConfig) layout() string {
	if tc.Partition == string(iceberg.PartitionDay) || tc.identityField() != "" {
		return "day"
	}
	return "hour"
}

// warehouseDir is Warehouse as a directory path.
func (tc TableConfig) warehouseDir() string { return strings.TrimPrefix(tc.Warehouse, "file://") }

// s3Warehouse is the bucket and prefix of a Warehouse in S3; inS3 is false
// for a directory.
func (tc TableConfig) s3Warehouse() (bucket, prefix string, inS3 bool) {
	rest, inS3 := strings.CutPrefix(tc.Warehouse, "s3://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	return bucket, strings.Trim(prefix, "/"), inS3
}

// warehouseURL is the warehouse as Iceberg spells locations (file:///PATH
// or s3://BUCKET/PREFIX), without a trailing slash: the tables' locations
// start with it.
func (tc TableConfig) warehouseURL() string {
	if bucket, prefix, inS3 := tc.s3Warehouse(); inS3 {
		return strings.TrimSuffix("s3://"+bucket+"/"+prefix, "/")
	}
	return "file://" + strings.TrimSuffix(tc.warehouseDir(), "/")
}

// namespace is Namespace or its default.
func (tc TableConfig) namespace() string {
	if tc.Namespace == "" {
		return "millrace"
	}
	return tc.Namespace
}

// catalogConfig is the sinks/iceberg configuration of tc, for a worker
// whose store is st: the warehouse must be where st writes (a file store's
// root, an S3 store's bucket and prefix), else the tables would list files
// the worker put elsewhere; the tables' S3 file IO takes st's settings. A
// nil st (a reader of the tables) is not checked, and cannot reach S3.
func (tc TableConfig) catalogConfig(st store.Store, logger *slog.Logger) (iceberg.Config, error) {
	c := iceberg.Config{Catalog: tc.Catalog, Namespace: tc.namespace(), Logger: logger}
	if c.Catalog == "" || c.Catalog == iceberg.CatalogSQLite {
		c.Path = tc.URI
	} else {
		c.URL = tc.URI
	}
	if tc.TokenFile != "" {
		token, err := os.ReadFile(tc.TokenFile)
		if err != nil {
			return c, fmt.Errorf("lake: iceberg.token_file: %w", err)
		}
		c.Token = strings.TrimSpace(string(token))
	}
	if tc.CredentialFile != "" {
		cred, err := os.ReadFile(tc.CredentialFile)
		if err != nil {
			return c, fmt.Errorf("lake: iceberg.credential_file: %w", err)
		}
		c.Credential = strings.TrimSpace(string(cred))
	}
	if ts, ok := st.(tableStore); ok {
		st = ts.Store
	}
	bucket, prefix, inS3 := tc.s3Warehouse()
	if !inS3 {
		c.Directory = tc.warehouseDir()
		if fs, ok := st.(*store.File); ok && filepath.Clean(fs.Root()) != filepath.Clean(c.Directory) {
			return c, fmt.Errorf("lake: iceberg.warehouse %s is not the sink's store %s: the sink writes the tables' files to its store",
				tc.Warehouse, fs.Root())
		}
		return c, nil
	}
	s3, ok := st.(*store.S3)
	if !ok {
		return c, fmt.Errorf("lake: iceberg.warehouse %s is in S3, but the sink's store is not: the sink writes the tables' files to its store", tc.Warehouse)
	}
	settings := s3.Config()
	if settings.Bucket != bucket || strings.Trim(settings.Prefix, "/") != prefix {
		return c, fmt.Errorf("lake: iceberg.warehouse %s is not the sink's store s3://%s/%s: the sink writes the tables' files to its store",
			tc.Warehouse, settings.Bucket, strings.Trim(settings.Prefix, "/"))
	}
	settings.Logger = nil // the store's, not the catalog's
	c.S3 = &settings
	return c, nil
}

// tableConfig is the sinks/iceberg table shape of tc.
func (tc TableConfig) tableConfig() iceberg.TableConfig {
	p, field, _ := strings.Cut(tc.Partition, ":")
	return iceberg.TableConfig{Partitioning: iceberg.Partitioning(p), PartitionField: field}
}
