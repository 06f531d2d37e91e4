package registry_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"millrace/schemas/srclient/srtest"
)

// BenchmarkGetSchemaByID serves GET /schemas/ids/{id} of a registered Avro
// schema through the registry's handler into an httptest.ResponseRecorder:
// routing, the read of the registry's view and the JSON answer, without a
// network or a client. It reports requests/s.
func BenchmarkGetSchemaByID(b *testing.B) {
	const schema = `{"type":"record","name":"Click","namespace":"shop","fields":[{"name":"url","type":"string"},{"name":"n","type":"long"}]}`
	h := srtest.Start(b).Server.Handler()
	body := `{"schema":` + strconv.Quote(schema) + `}`
	req := httptest.NewRequest(http.MethodPost, "/subjects/clicks-value/versions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Body.String(), `{"id":`) {
		b.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	id := strings.TrimSuffix(strings.TrimPrefix(rec.Body.String(), `{"id":`), "}")
	get := httptest.NewRequest(http.MethodGet, "/schemas/ids/"+strings.TrimSpace(id), nil)
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
