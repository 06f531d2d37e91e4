package registry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkGetSchemaByID serves GET /schemas/ids/{id} of a registered
// schema through the registry's handler into an httptest.ResponseRecorder:
// routing, the read of the registry's view and the JSON answer, without a
// network or a client. The schema is the tests' toy language registered as
// AVRO: the read returns the stored text and parses nothing. It reports
// requests/s.
func BenchmarkGetSchemaByID(b *testing.B) {
	srv := New(Config{Types: toyTypes()}, NewMemoryLog(), &fakeElection{self: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
	}()
	if err := srv.CatchUp(ctx); err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	body := `{"schema":` + strconv.Quote(`{"fields":[{"name":"url"},{"name":"n","default":0}]}`) + `}`
	req := httptest.NewRequest(http.MethodPost, "/subjects/clicks-value/versions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	id, ok := strings.CutPrefix(strings.TrimSpace(rec.Body.String()), `{"id":`)
	if rec.Code != http.StatusOK || !ok {
		b.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	get := httptest.NewRequest(http.MethodGet, "/schemas/ids/"+strings.TrimSuffix(id, "}"), nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, get)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", get.URL, rec.Code, rec.Body)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}
