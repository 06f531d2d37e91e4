package iceberg

import (
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
)

// restCatalog is a fake Iceberg REST catalog: the routes of the REST
// catalog OpenAPI spec that iceberg-go's REST client calls for the sink
// (config, create namespace, create, load and commit a table), backed by
// iceberg-go's SQL catalog on SQLite. Each request is translated to the SQL
// catalog's call and its result to the spec's response, so the tables, the
// metadata files and the compare-and-swap are a real catalog's; only the
// HTTP layer is this file's. It exists because the unit tests cannot start
// a REST catalog server (none ships as a Go module or a Debian package),
// and the REST client must still be driven by the sink's code.
//
// Like a real server it takes a path prefix from /v1/config (the client
// must use it), advertises exactly the endpoints it serves, chooses table
// locations in a warehouse of its own unless the client names one, and
// answers a failed commit requirement with 409 CommitFailedException. It
// requires a bearer token, as a catalog behind authentication does.
type restCatalog struct {
	sql   catalog.Catalog
	token string
	// credential, when set, is the OAuth2 client credential
	// ("client_id:client_secret") POST /v1/oauth/tokens exchanges for
	// token (client_credentials grant).
	credential string

	mu        sync.Mutex     // guards the following
	warehouse string         // the warehouse the client asked for in GET /v1/config
	errors    map[string]int // error responses by the ErrorModel's type
}

// restPrefix is the path prefix the fake hands the client in /v1/config.
const restPrefix = "lake"

// startRESTCatalog serves a fake REST catalog on 127.0.0.1 whose own
// warehouse is the directory dir, to clients that send token.
func startRESTCatalog(t *testing.T, dir, token string) (*httptest.Server, *restCatalog) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dir+"/rest-catalog.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cat, err := sqlcat.NewCatalog("rest", db, sqlcat.SQLite,
		iceberg.Properties{"init_catalog_tables": "true", "warehouse": "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	rc := &restCatalog{sql: cat, token: token, errors: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/oauth/tokens", rc.issueToken)
	mux.HandleFunc("GET /v1/config", rc.config)
	mux.HandleFunc("POST /v1/"+restPrefix+"/namespaces", rc.createNamespace)
	mux.HandleFunc("POST /v1/"+restPrefix+"/namespaces/{namespace}/tables", rc.createTable)
	mux.HandleFunc("GET /v1/"+restPrefix+"/namespaces/{namespace}/tables/{table}", rc.loadTable)
	mux.HandleFunc("POST /v1/"+restPrefix+"/namespaces/{namespace}/tables/{table}", rc.commitTable)
	srv := httptest.NewServer(rc.authorized(mux)) // on 127.0.0.1
	t.Cleanup(srv.Close)
	return srv, rc
}

// authorized refuses a request without the bearer token (401, the spec's
// NotAuthorizedException).
func (rc *restCatalog) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/oauth/tokens" && r.Header.Get("Authorization") != "Bearer "+rc.token {
			rc.fail(w, http.StatusUnauthorized, "NotAuthorizedException", errors.New("no valid bearer token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// issueToken is POST /v1/oauth/tokens with the client_credentials grant:
// the catalog's token for its credential, 401 for any other.
func (rc *restCatalog) issueToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "client_credentials" ||
		rc.credential == "" || r.Form.Get("client_id")+":"+r.Form.Get("client_secret") != rc.credential {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":"invalid_client"}`))
		return
	}
	reply(w, map[string]any{"access_token": rc.token, "token_type": "bearer", "expires_in": 3600,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})
}

// config is GET /v1/config: the CatalogConfig of the spec.
func (rc *restCatalog) config(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.warehouse = r.URL.Query().Get("warehouse")
	rc.mu.Unlock()
	reply(w, map[string]any{
		"defaults":  map[string]string{},
		"overrides": map[string]string{"prefix": restPrefix},
		"endpoints": []string{
			"POST /v1/{prefix}/namespaces",
			"POST /v1/{prefix}/namespaces/{namespace}/tables",
			"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
			"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
		},
	})
}

// createNamespace is POST /v1/{prefix}/namespaces (CreateNamespaceRequest).
func (rc *restCatalog) createNamespace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Namespace  table.Identifier   `json:"namespace"`
		Properties iceberg.Properties `json:"properties"`
	}
	if !rc.decode(w, r, &req) {
		return
	}
	err := rc.sql.CreateNamespace(r.Context(), req.Namespace, req.Properties)
	if errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		rc.fail(w, http.StatusConflict, "AlreadyExistsException", err)
		return
	}
	if err != nil {
		rc.fail(w, http.StatusInternalServerError, "ServerError", err)
		return
	}
	reply(w, map[string]any{"namespace": req.Namespace, "properties": req.Properties})
}

// createTable is POST /v1/{prefix}/namespaces/{namespace}/tables
// (CreateTableRequest). The spec's source IDs refer to the request's
// schema; the SQL catalog binds them through table.NewMetadata, as the
// spec's decoders (UnboundPartitionSpec, UnboundSortOrder) expect.
func (rc *restCatalog) createTable(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name          string                        `json:"name"`
		Schema        *iceberg.Schema               `json:"schema"`
		Location      string                        `json:"location"`
		PartitionSpec *iceberg.UnboundPartitionSpec `json:"partition-spec"`
		WriteOrder    *table.UnboundSortOrder       `json:"write-order"`
		StageCreate   bool                          `json:"stage-create"`
		Properties    iceberg.Properties            `json:"properties"`
	}
	if !rc.decode(w, r, &req) {
		return
	}
	if req.StageCreate || req.Schema == nil {
		rc.fail(w, http.StatusBadRequest, "BadRequestException", errors.New("a schema is required; staged creation is not served"))
		return
	}
	opts := []catalog.CreateTableOpt{catalog.WithProperties(req.Properties), catalog.WithLocation(req.Location)}
	if req.PartitionSpec != nil {
		opts = append(opts, catalog.WithPartitionSpec(&req.PartitionSpec.PartitionSpec))
	}
	if req.WriteOrder != nil {
		opts = append(opts, catalog.WithSortOrder(req.WriteOrder.SortOrder))
	}
	tbl, err := rc.sql.CreateTable(r.Context(), rc.ident(r, req.Name), req.Schema, opts...)
	switch {
	case errors.Is(err, catalog.ErrTableAlreadyExists):
		rc.fail(w, http.StatusConflict, "AlreadyExistsException", err)
	case errors.Is(err, catalog.ErrNoSuchNamespace):
		rc.fail(w, http.StatusNotFound, "NoSuchNamespaceException", err)
	case err != nil:
		rc.fail(w, http.StatusInternalServerError, "ServerError", err)
	default:
		replyTable(w, tbl.MetadataLocation(), tbl.Metadata())
	}
}

// loadTable is GET /v1/{prefix}/namespaces/{namespace}/tables/{table}.
func (rc *restCatalog) loadTable(w http.ResponseWriter, r *http.Request) {
	tbl, err := rc.sql.LoadTable(r.Context(), rc.ident(r, r.PathValue("table")))
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable):
		rc.fail(w, http.StatusNotFound, "NoSuchTableException", err)
	case err != nil:
		rc.fail(w, http.StatusInternalServerError, "ServerError", err)
	default:
		replyTable(w, tbl.MetadataLocation(), tbl.Metadata())
	}
}

// commitTable is POST /v1/{prefix}/namespaces/{namespace}/tables/{table}
// (CommitTableRequest). The requirements are checked against the table
// here, so that a stale one is the spec's 409 (the SQL catalog reports it
// as a plain error); a race the SQL catalog's own compare-and-swap loses
// is a 409 too.
func (rc *restCatalog) commitTable(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Requirements table.Requirements `json:"requirements"`
		Updates      table.Updates      `json:"updates"`
	}
	if !rc.decode(w, r, &req) {
		return
	}
	id := rc.ident(r, r.PathValue("table"))
	current, err := rc.sql.LoadTable(r.Context(), id)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		rc.fail(w, http.StatusNotFound, "NoSuchTableException", err)
		return
	}
	if err != nil {
		rc.fail(w, http.StatusInternalServerError, "ServerError", err)
		return
	}
	for _, req := range req.Requirements {
		if err := req.Validate(current.Metadata()); err != nil {
			rc.fail(w, http.StatusConflict, "CommitFailedException", err)
			return
		}
	}
	meta, location, err := rc.sql.CommitTable(r.Context(), id, req.Requirements, req.Updates)
	switch {
	case errors.Is(err, table.ErrCommitFailed):
		rc.fail(w, http.StatusConflict, "CommitFailedException", err)
	case err != nil:
		rc.fail(w, http.StatusInternalServerError, "CommitStateUnknownException", err)
	default:
		replyTable(w, location, meta)
	}
}

// ident is the table name in the request's namespace; the spec joins a
// namespace's levels with the unit separator.
func (rc *restCatalog) ident(r *http.Request, name string) table.Identifier {
	return append(strings.Split(r.PathValue("namespace"), "\x1f"), name)
}

// replyTable answers with the spec's LoadTableResult.
func replyTable(w http.ResponseWriter, location string, meta table.Metadata) {
	reply(w, map[string]any{"metadata-location": location, "metadata": meta, "config": map[string]string{}})
}

func (rc *restCatalog) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		rc.fail(w, http.StatusBadRequest, "BadRequestException", err)
		return false
	}
	return true
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// fail answers with the spec's ErrorModel.
func (rc *restCatalog) fail(w http.ResponseWriter, status int, kind string, err error) {
	rc.mu.Lock()
	rc.errors[kind]++
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": err.Error(), "type": kind, "code": status}})
}

// TestRESTCatalog drives the sink's catalog code through iceberg-go's REST
// client against the fake REST catalog: a client without the catalog's
// token is refused, the table is created with the sink's schema and hour
// spec where the sink writes its files, rolls land with their offsets, a
// stale commit is a conflict that rebases or a zombie that is refused, and
// a second client sees the first one's progress.
func TestRESTCatalog(t *testing.T) {
	warehouse := t.TempDir()
	srv, rc := startRESTCatalog(t, t.TempDir(), "s3cret")
	if _, err := Open(t.Context(), Config{Catalog: CatalogREST, URL: srv.URL, Directory: warehouse}); !errors.Is(err, rest.ErrUnauthorized) {
		t.Fatalf("opening the catalog without its token: %v, want rest.ErrUnauthorized", err)
	}
	open := func() *Catalog {
		c, err := Open(t.Context(), Config{Catalog: CatalogREST, URL: srv.URL, Directory: warehouse, Token: "s3cret"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		})
		return c
	}
	c := open()
	if got, want := rc.warehouseAsked(), "file://"+warehouse; got != want {
		t.Errorf("warehouse sent in GET /v1/config %q, want %q", got, want)
	}

	tbl := metricsTable(t, c)
	// The server's own warehouse is elsewhere: the table is where the sink
	// writes because the sink asked for that location.
	if got, want := tbl.Location(), "file://"+warehouse+"/millrace.db/metrics"; got != want {
		t.Errorf("table location %s, want %s", got, want)
	}
	checkMetricsShape(t, tbl)

	testConflictRebaseOrZombie(t, c)
	// The two stale commits (the rebased worker's first try, the zombie's)
	// were the spec's 409; the only other errors were the tokenless open's
	// 401 and the 404 of the load before the table was created.
	wantErrors := map[string]int{"NotAuthorizedException": 1, "CommitFailedException": 2, "NoSuchTableException": 1}
	if got := rc.errorCounts(); !maps.Equal(got, wantErrors) {
		t.Errorf("error responses %v, want %v", got, wantErrors)
	}

	// A second client (another sink process) sees the table and its progress.
	tbl = metricsTable(t, open())
	if got := encodeOffsets(progress(t, tbl, "sink").Offsets); got != "0:6,1:3" {
		t.Errorf("offsets seen by a second catalog client %s, want 0:6,1:3", got)
	}
	if got := len(scan(t, tbl)); got != 9 {
		t.Errorf("rows seen by a second catalog client: %d, want 9", got)
	}
}

// warehouseAsked is the warehouse the client named in GET /v1/config.
func (rc *restCatalog) warehouseAsked() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.warehouse
}

// errorCounts is the error responses so far, by type.
func (rc *restCatalog) errorCounts() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return maps.Clone(rc.errors)
}

// TestRESTCatalogOAuthCredential: a client with the catalog's OAuth2
// client credential gets its token from /v1/oauth/tokens and opens the
// catalog; a wrong credential is refused.
func TestRESTCatalogOAuthCredential(t *testing.T) {
	srv, rc := startRESTCatalog(t, t.TempDir(), "issued-token")
	rc.credential = "millrace:s3cret"
	warehouse := t.TempDir()
	if _, err := Open(t.Context(), Config{Catalog: CatalogREST, URL: srv.URL, Directory: warehouse, Credential: "millrace:wrong"}); err == nil {
		t.Fatal("a wrong credential opened the catalog")
	}
	c, err := Open(t.Context(), Config{Catalog: CatalogREST, URL: srv.URL, Directory: warehouse, Credential: "millrace:s3cret"})
	if err != nil {
		t.Fatalf("opening with the catalog's credential: %v", err)
	}
	defer c.Close()
	checkMetricsShape(t, metricsTable(t, c))
}
