package lake

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"millrace/sinks/iceberg"
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
	// catalog's base URL. Required for postgres and rest.
	URI string `yaml:"uri"`
	// Warehouse is the directory that holds the tables: a topic's table is
	// <warehouse>/<namespace>.db/<topic>, its data files under its data/.
	// It must be the directory the sink's store writes to (`millrace sink`
	// sets it from --out). Required.
	Warehouse string `yaml:"warehouse"`
	// Namespace holds one table per topic. Default "millrace".
	Namespace string `yaml:"namespace"`
	// Partition is the tables' partition spec: "hour" (default:
	// hour(<event time>)), "day", "identity:<field>" (the value of a
	// string, int64 or bool field of the schema; tablepartition.go), or
	// "none".
	Partition string `yaml:"partition"`
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
	if tc.Warehouse == "" {
		errs = append(errs, errors.New("lake: iceberg.warehouse: the directory that holds the tables (the sink's --out) is needed"))
	} else if dir := strings.TrimPrefix(tc.Warehouse, "file://"); strings.Contains(dir, "://") || !filepath.IsAbs(dir) {
		errs = append(errs, fmt.Errorf("lake: iceberg.warehouse %q: want an absolute directory (file:///PATH); "+
			"tables in S3 are not supported yet", tc.Warehouse))
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

// namespace is Namespace or its default.
func (tc TableConfig) namespace() string {
	if tc.Namespace == "" {
		return "millrace"
	}
	return tc.Namespace
}

// catalogConfig is the sinks/iceberg configuration of tc.
func (tc TableConfig) catalogConfig(logger *slog.Logger) iceberg.Config {
	c := iceberg.Config{Catalog: tc.Catalog, Namespace: tc.namespace(), Directory: tc.warehouseDir(), Logger: logger}
	if c.Catalog == "" || c.Catalog == iceberg.CatalogSQLite {
		c.Path = tc.URI
	} else {
		c.URL = tc.URI
	}
	return c
}

// tableConfig is the sinks/iceberg table shape of tc.
func (tc TableConfig) tableConfig() iceberg.TableConfig {
	p, field, _ := strings.Cut(tc.Partition, ":")
	return iceberg.TableConfig{Partitioning: iceberg.Partitioning(p), PartitionField: field}
}
