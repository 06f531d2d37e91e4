package iceberg

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"millrace/store"
)

// The catalogs a Config may name.
const (
	// CatalogSQLite is iceberg-go's SQL catalog on an embedded SQLite file
	// (modernc.org/sqlite, no cgo): the default, needing no outside service.
	CatalogSQLite = "sqlite"
	// CatalogPostgres is the same SQL catalog on a PostgreSQL database, for
	// sink processes on several hosts.
	CatalogPostgres = "postgres"
	// CatalogREST is a client of an Iceberg REST catalog a user already runs.
	CatalogREST = "rest"
)

// Config says which catalog holds the tables and where their files go.
type Config struct {
	// Catalog is CatalogSQLite (default), CatalogPostgres or CatalogREST.
	Catalog string
	// Name is the catalog's name, recorded in the SQL catalog's rows.
	// Default "millrace".
	Name string
	// Path is the SQLite file of CatalogSQLite; default <Directory>/catalog.db.
	Path string
	// URL is the PostgreSQL connection URL ("postgres://user:pw@host:5432/db")
	// of CatalogPostgres, or the REST catalog's base URI of CatalogREST.
	URL string
	// Token is an optional bearer token sent to a REST catalog.
	Token string
	// Credential is an optional OAuth2 client credential of a REST catalog,
	// "client_id:client_secret" (or the secret alone): the client exchanges
	// it at the catalog's /v1/oauth/tokens for the bearer tokens it sends,
	// as Polaris, Nessie and other catalogs behind OAuth2 expect.
	Credential string
	// Namespace holds one table per topic. Default "millrace".
	Namespace string
	// Directory is the warehouse on a filesystem: tables' data and metadata go
	// under <Directory>/<namespace>.db/<topic>. Exactly one of Directory and S3
	// is set, except for a REST catalog, which may choose the warehouse itself.
	Directory string
	// S3 puts the warehouse in a bucket (under its prefix), with the sink's S3
	// store settings.
	S3 *store.S3Config
	// Logger receives the package's logs; nil discards them.
	Logger *slog.Logger
}

// Validate applies the defaults and rejects impossible combinations.
func (c *Config) Validate() error {
	if c.Catalog == "" {
		c.Catalog = CatalogSQLite
	}
	if c.Name == "" {
		c.Name = "millrace"
	}
	if c.Namespace == "" {
		c.Namespace = "millrace"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Directory != "" && c.S3 != nil {
		return errors.New("iceberg: a warehouse is a directory or an S3 bucket, not both")
	}
	if c.S3 != nil && c.S3.Bucket == "" {
		return errors.New("iceberg: the S3 warehouse needs a bucket")
	}
	switch c.Catalog {
	case CatalogSQLite:
		if c.Path == "" && c.Directory == "" {
			return errors.New("iceberg: the sqlite catalog needs a path (or a warehouse directory to keep catalog.db in)")
		}
		if c.URL != "" {
			return errors.New("iceberg: the sqlite catalog takes a path, not a URL")
		}
	case CatalogPostgres, CatalogREST:
		if c.URL == "" {
			return fmt.Errorf("iceberg: the %s catalog needs a URL", c.Catalog)
		}
	default:
		return fmt.Errorf("iceberg: catalog %q: want sqlite, postgres or rest", c.Catalog)
	}
	if c.Catalog != CatalogREST && c.Directory == "" && c.S3 == nil {
		return fmt.Errorf("iceberg: the %s catalog needs a warehouse: a directory or an S3 bucket", c.Catalog)
	}
	if (c.Token != "" || c.Credential != "") && c.Catalog != CatalogREST {
		return errors.New("iceberg: a token or an OAuth2 credential is for a REST catalog only")
	}
	if c.Token != "" && c.Credential != "" {
		return errors.New("iceberg: give a REST catalog a token or an OAuth2 credential, not both")
	}
	return nil
}

// warehouse is the warehouse's location as Iceberg spells it: file:///dir
// or s3://bucket/prefix; "" leaves it to a REST catalog.
func (c *Config) warehouse() string {
	switch {
	case c.S3 != nil && strings.Trim(c.S3.Prefix, "/") == "":
		return "s3://" + c.S3.Bucket
	case c.S3 != nil:
		return "s3://" + c.S3.Bucket + "/" + strings.Trim(c.S3.Prefix, "/")
	case c.Directory != "":
		return "file://" + c.Directory
	}
	return ""
}
