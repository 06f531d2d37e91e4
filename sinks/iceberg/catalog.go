package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the s3:// file IO; not the other clouds' SDKs
	_ "github.com/jackc/pgx/v5/stdlib"             // database/sql driver "pgx"
	_ "modernc.org/sqlite"                         // database/sql driver "sqlite", pure Go

	"millrace/store"
)

// Catalog is an open Iceberg catalog and the namespace the sink's tables live in.
type Catalog struct {
	cfg     Config
	catalog catalog.Catalog
	db      *sql.DB // the SQL catalog's database; nil for REST
}

// Open opens the catalog cfg names, creating the SQL catalog's tables and
// the namespace when they do not exist yet.
func Open(ctx context.Context, cfg Config) (*Catalog, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	useDurableFS()
	props := ioProperties(cfg.S3)
	if w := cfg.warehouse(); w != "" {
		props["warehouse"] = w
	}
	c := &Catalog{cfg: cfg}
	var err error
	switch cfg.Catalog {
	case CatalogSQLite, CatalogPostgres:
		driver, dsn, dialect := "pgx", cfg.URL, sqlcat.Postgres
		if cfg.Catalog == CatalogSQLite {
			path := cfg.Path
			if path == "" {
				path = filepath.Join(cfg.Directory, "catalog.db")
			}
			// WAL and a busy timeout on every pooled connection: a reader
			// never blocks the commit, and two writers wait for each other
			// instead of failing with SQLITE_BUSY. The commit's fencing is
			// the catalog's compare-and-swap, not the database's locking.
			driver, dialect = "sqlite", sqlcat.SQLite
			dsn = "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
		}
		if c.db, err = sql.Open(driver, dsn); err != nil {
			return nil, fmt.Errorf("iceberg: open the %s catalog: %w", cfg.Catalog, err)
		}
		props["init_catalog_tables"] = "true"
		c.catalog, err = sqlcat.NewCatalog(cfg.Name, c.db, dialect, props)
	case CatalogREST:
		opts := []rest.Option{rest.WithAdditionalProps(props)}
		if w := cfg.warehouse(); w != "" {
			opts = append(opts, rest.WithWarehouseLocation(w))
		}
		if cfg.Token != "" {
			opts = append(opts, rest.WithOAuthToken(cfg.Token))
		}
		if cfg.Credential != "" {
			opts = append(opts, rest.WithCredential(cfg.Credential))
		}
		c.catalog, err = rest.NewCatalog(ctx, cfg.Name, cfg.URL, opts...)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("iceberg: open the %s catalog: %w", cfg.Catalog, err)
	}
	ns := catalog.ToIdentifier(cfg.Namespace)
	err = c.catalog.CreateNamespace(ctx, ns, nil)
	if err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		c.Close()
		return nil, fmt.Errorf("iceberg: create namespace %s: %w", cfg.Namespace, err)
	}
	return c, nil
}

// Close releases the SQL catalog's database connections, or the REST
// client's idle connections.
func (c *Catalog) Close() error {
	if r, ok := c.catalog.(*rest.Catalog); ok && r != nil {
		return r.Close()
	}
	if c.db == nil {
		return nil
	}
	return c.db.Close()
}

// Catalog returns the iceberg-go catalog, for what this package does not wrap.
func (c *Catalog) Catalog() catalog.Catalog { return c.catalog }

// Namespace returns the namespace of the sink's tables.
func (c *Catalog) Namespace() string { return c.cfg.Namespace }

// ioProperties maps the sink's S3 store settings to iceberg-go's file IO
// properties (iceberg-go's io/gocloud/s3), so that the table's metadata,
// manifests and data files are read and written exactly as the store
// reaches the bucket: the same endpoint, region and credentials, and
// buckets addressed by path, as the store always does (S3-compatible
// servers such as versitygw and MinIO on an address need it; virtual-host
// style needs DNS for each bucket). AWS's own default endpoint is left to
// the SDK, which then picks the region's endpoint.
func ioProperties(s3 *store.S3Config) iceberg.Properties {
	props := iceberg.Properties{}
	if s3 == nil {
		return props
	}
	region := s3.Region
	if region == "" {
		region = "us-east-1" // the store's default
	}
	props[iceio.S3Region] = region
	if s3.Endpoint != "" && s3.Endpoint != awsEndpoint {
		props[iceio.S3EndpointURL] = s3.Endpoint
	}
	props[iceio.S3ForceVirtualAddressing] = "false"
	if s3.AccessKey != "" {
		props[iceio.S3AccessKeyID] = s3.AccessKey
		props[iceio.S3SecretAccessKey] = s3.SecretKey
	}
	return props
}

// awsEndpoint is the S3 store's default endpoint.
const awsEndpoint = "https://s3.amazonaws.com"
