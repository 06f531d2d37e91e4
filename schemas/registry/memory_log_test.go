package registry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMemoryLog: Read waits for records, End is the next offset, and a
// Writer is fenced by the next one.
func TestMemoryLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := NewMemoryLog()
	got := make(chan []Record, 1)
	go func() {
		records, err := log.Read(ctx, 0)
		if err != nil {
			t.Error(err)
		}
		got <- records
	}()
	first := log.Writer()
	if last, err := first.Append(ctx, []Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b")}}); err != nil || last != 1 {
		t.Fatalf("append: %d, %v", last, err)
	}
	records := <-got
	if len(records) != 2 || records[1].Offset != 1 || records[1].Value != nil || string(records[0].Value) != "1" {
		t.Errorf("read %+v", records)
	}
	second := log.Writer()
	if _, err := first.Append(ctx, []Record{{Key: []byte("c")}}); !errors.Is(err, ErrFenced) {
		t.Errorf("append through a fenced writer: %v", err)
	}
	if last, err := second.Append(ctx, []Record{{Key: []byte("d")}}); err != nil || last != 2 {
		t.Errorf("append through the new writer: %d, %v", last, err)
	}
	if end, _ := log.End(ctx); end != 3 {
		t.Errorf("end %d, want 3", end)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := log.Read(cancelled, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("read past the end with a done context: %v", err)
	}
}

// FuzzHandler: no request, however hostile, panics the API. Writes meet
// a registry with no primary, so the fuzzer needs no log.
func FuzzHandler(f *testing.F) {
	for _, seed := range []string{
		"GET /subjects/s/versions/latest", "POST /subjects/s/versions", "GET /schemas/ids/1",
		"DELETE /subjects/s?permanent=true", "POST /compatibility/subjects/s/versions/1?verbose=true",
		"GET /schemas?latestOnly=true&deleted=true", "PUT /config/s", "GET /subjects/s/versions/1/referencedby",
	} {
		f.Add(seed, `{"schema":"{\"fields\":[{\"name\":\"a\"}]}","references":[{"name":"X","subject":"s","version":1}]}`)
	}
	log := NewMemoryLog()
	_, err := log.Append(context.Background(), []Record{
		schemaRecord(schemaValue{Subject: "s", Version: 1, ID: 1, Schema: schemaA}),
		schemaRecord(schemaValue{Subject: "s", Version: 2, ID: 2, Schema: `{"fields":[],"uses":["X"]}`, References: []Reference{{"X", "s", 1}}}),
	})
	if err != nil {
		f.Fatal(err)
	}
	srv := New(Config{Types: toyTypes()}, log, &fakeElection{})
	srv.mu.Lock()
	records, _ := log.Read(context.Background(), 0)
	for _, r := range records {
		srv.state.Apply(r)
	}
	srv.mu.Unlock()
	handler := srv.Handler()
	f.Fuzz(func(t *testing.T, request, body string) {
		method, target, _ := strings.Cut(request, " ")
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " \r\n") {
			return
		}
		req, err := http.NewRequest(method, "http://registry"+target, strings.NewReader(body))
		if err != nil {
			return
		}
		handler.ServeHTTP(httptest.NewRecorder(), req)
	})
}
