package srclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"millrace/internal/clientauth"
	"millrace/internal/leaktest"
	"millrace/schemas/format"
	"millrace/schemas/srclient/srtest"
)

// TestMain fails the tests if a goroutine outlives them.
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

const (
	avroClick  = `{"type":"record","name":"Click","namespace":"shop","fields":[{"name":"url","type":"string"},{"name":"n","type":"long"}]}`
	jsonClick  = `{"type":"object","properties":{"url":{"type":"string"},"n":{"type":"integer"}},"required":["url"]}`
	protoOrder = `syntax = "proto3";
package shop;
message Order { string id = 1; int64 units = 2; }
`
)

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEncodeDecodeEachType: a value encoded with a subject's latest schema
// is framed as Confluent's serializers frame it (magic 0, the ID big
// endian) and decodes, through a second client with an empty cache, to the
// same value, for each schema language.
func TestEncodeDecodeEachType(t *testing.T) {
	t.Parallel()
	reg := srtest.Start(t)
	ctx := context.Background()
	for _, c := range []struct {
		subject, typ, text string
		value              map[string]any
		want               map[string]any
	}{
		{"clicks-value", format.Avro, avroClick, map[string]any{"url": "/a", "n": 3.0}, map[string]any{"url": "/a", "n": int64(3)}},
		{"json-value", format.JSON, jsonClick, map[string]any{"url": "/b", "n": 4.0}, map[string]any{"url": "/b", "n": int64(4)}},
		{"orders-value", format.Protobuf, protoOrder, map[string]any{"id": "o-1", "units": 5.0}, map[string]any{"id": "o-1", "units": int64(5)}},
	} {
		writer := newClient(t, Config{URLs: []string{reg.URL}})
		got, err := writer.Register(ctx, c.subject, Registration{Text: c.text, Type: c.typ})
		if err != nil {
			t.Fatalf("%s: register: %v", c.typ, err)
		}
		framed, err := writer.Encode(ctx, c.subject, c.value)
		if err != nil {
			t.Fatalf("%s: encode: %v", c.typ, err)
		}
		if framed[0] != 0 || int(framed[1])<<24|int(framed[2])<<16|int(framed[3])<<8|int(framed[4]) != got.ID {
			t.Fatalf("%s: framed as % x, want magic 0 and ID %d", c.typ, framed[:5], got.ID)
		}
		reader := newClient(t, Config{URLs: []string{reg.URL}})
		id, schema, value, err := reader.Decode(ctx, framed)
		if err != nil {
			t.Fatalf("%s: decode: %v", c.typ, err)
		}
		if id != got.ID || schema.Type().Name() != c.typ || !reflect.DeepEqual(value, c.want) {
			t.Errorf("%s: decoded ID %d type %s value %#v; want %d, %#v", c.typ, id, schema.Type().Name(), value, got.ID, c.want)
		}
	}
}

// TestReferencesResolveTransitively: a schema whose reference has a
// reference of its own parses on a client that has seen neither, and so
// does its value (Confluent: references are fetched by subject and
// version, recursively).
func TestReferencesResolveTransitively(t *testing.T) {
	t.Parallel()
	reg := srtest.Start(t)
	ctx := context.Background()
	c := newClient(t, Config{URLs: []string{reg.URL}})
	money := `{"type":"record","name":"Money","namespace":"shop","fields":[{"name":"cents","type":"long"}]}`
	line := `{"type":"record","name":"Line","namespace":"shop","fields":[{"name":"price","type":"shop.Money"}]}`
	order := `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"line","type":"shop.Line"}]}`
	if _, err := c.Register(ctx, "money", Registration{Text: money}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(ctx, "line", Registration{Text: line, References: []sr.SchemaReference{{Name: "shop.Money", Subject: "money", Version: 1}}}); err != nil {
		t.Fatal(err)
	}
	o, err := c.Register(ctx, "orders-value", Registration{Text: order, References: []sr.SchemaReference{{Name: "shop.Line", Subject: "line", Version: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	framed, err := c.Encode(ctx, "orders-value", map[string]any{"line": map[string]any{"price": map[string]any{"cents": 250.0}}})
	if err != nil {
		t.Fatal(err)
	}
	fresh := newClient(t, Config{URLs: []string{reg.URL}})
	id, _, value, err := fresh.Decode(ctx, framed)
	want := map[string]any{"line": map[string]any{"price": map[string]any{"cents": int64(250)}}}
	if err != nil || id != o.ID || !reflect.DeepEqual(value, want) {
		t.Fatalf("decode: %d %#v %v; want %d %#v", id, value, err, o.ID, want)
	}
}

// TestErrorsAreClassified: what can never decode (no framing, an ID the
// registry does not know, a payload the schema does not read) is told
// apart from a registry that does not answer, so a sink dead-letters the
// first and retries the second.
func TestErrorsAreClassified(t *testing.T) {
	t.Parallel()
	reg := srtest.Start(t)
	ctx := context.Background()
	c := newClient(t, Config{URLs: []string{reg.URL}})
	s, err := c.Register(ctx, "clicks-value", Registration{Text: avroClick})
	if err != nil {
		t.Fatal(err)
	}
	frame := func(id int, payload ...byte) []byte {
		return append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, payload...)
	}
	for _, tc := range []struct {
		name  string
		value []byte
		want  error
	}{
		{"plain JSON", []byte(`{"url":"/a"}`), ErrNotFramed},
		{"short", []byte{0, 0, 1}, ErrNotFramed},
		{"magic byte 1", []byte{1, 0, 0, 0, 1, 2}, ErrNotFramed},
		{"unknown ID", frame(s.ID + 100), ErrUnknownSchema},
		// A string whose length says 50 bytes, with none following.
		{"truncated payload", frame(s.ID, 100), ErrUndecodable},
	} {
		_, _, _, err := c.Decode(ctx, tc.value)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want class %v", tc.name, err, tc.want)
		}
	}
	down := newClient(t, Config{URLs: []string{reg.URL}})
	reg.Close()
	if _, _, _, err := down.Decode(ctx, frame(s.ID, 2, 'a', 2)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("registry down: error %v, want ErrUnavailable", err)
	}
	// The schema already cached still decodes.
	if _, _, _, err := c.Decode(ctx, frame(s.ID, 2, 'a', 2)); err != nil {
		t.Errorf("cached schema with the registry down: %v", err)
	}
}

// TestCacheIsBounded: the cache keeps at most CacheSize schemas, the least
// recently used evicted, and decoding still works for an evicted ID.
func TestCacheIsBounded(t *testing.T) {
	t.Parallel()
	reg := srtest.Start(t)
	ctx := context.Background()
	writer := newClient(t, Config{URLs: []string{reg.URL}})
	reader := newClient(t, Config{URLs: []string{reg.URL}, CacheSize: 2})
	var framed [][]byte
	for _, name := range []string{"a", "b", "c"} {
		text := strings.Replace(avroClick, `"Click"`, `"`+strings.ToUpper(name)+`"`, 1)
		if _, err := writer.Register(ctx, name, Registration{Text: text}); err != nil {
			t.Fatal(err)
		}
		b, err := writer.Encode(ctx, name, map[string]any{"url": name, "n": 1.0})
		if err != nil {
			t.Fatal(err)
		}
		framed = append(framed, b)
	}
	for _, b := range append(framed, framed[0]) {
		if _, _, _, err := reader.Decode(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	reader.mu.Lock()
	n := reader.byID.len()
	reader.mu.Unlock()
	if n != 2 {
		t.Errorf("cache holds %d schemas, want CacheSize 2", n)
	}
}

// TestLatestRefreshes: a subject's latest version is asked again once
// Refresh has passed, so a new version applies; while the registry is
// down the version held is kept.
func TestLatestRefreshes(t *testing.T) {
	t.Parallel()
	reg := srtest.Start(t)
	ctx := context.Background()
	admin := newClient(t, Config{URLs: []string{reg.URL}})
	v2 := `{"type":"record","name":"Click","namespace":"shop","fields":[{"name":"url","type":"string"},{"name":"n","type":"long"},{"name":"ref","type":"string","default":""}]}`
	if _, err := admin.Register(ctx, "clicks-value", Registration{Text: avroClick}); err != nil {
		t.Fatal(err)
	}
	held := newClient(t, Config{URLs: []string{reg.URL}, Refresh: time.Hour})
	fresh := newClient(t, Config{URLs: []string{reg.URL}, Refresh: time.Nanosecond})
	for _, c := range []*Client{held, fresh} {
		if s, err := c.Latest(ctx, "clicks-value"); err != nil || s.Version != 1 {
			t.Fatalf("latest: version %d, %v", s.Version, err)
		}
	}
	if _, err := admin.Register(ctx, "clicks-value", Registration{Text: v2}); err != nil {
		t.Fatal(err)
	}
	if s, _ := held.Latest(ctx, "clicks-value"); s.Version != 1 {
		t.Errorf("within Refresh: version %d, want the one held, 1", s.Version)
	}
	if s, _ := fresh.Latest(ctx, "clicks-value"); s.Version != 2 {
		t.Errorf("after Refresh: version %d, want 2", s.Version)
	}
	reg.Close()
	if s, err := fresh.Latest(ctx, "clicks-value"); err != nil || s.Version != 2 {
		t.Errorf("registry down: version %d, %v; want the version held, 2", s.Version, err)
	}
	if _, err := newClient(t, Config{URLs: []string{reg.URL}}).Latest(ctx, "clicks-value"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("registry down, nothing held: %v, want ErrUnavailable", err)
	}
}

// TestBasicAuth: the user and the password (or its file) go with every
// request; a wrong password is ErrUnavailable, as the sink must retry
// once the operator has fixed it rather than dead-letter records.
func TestBasicAuth(t *testing.T) {
	t.Parallel()
	reg := srtest.Start(t, srtest.BasicAuth("sink", "s3cret"))
	ctx := context.Background()
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Config{URLs: []string{reg.URL}, Username: "sink", PasswordFile: pwFile})
	if _, err := c.Register(ctx, "clicks-value", Registration{Text: avroClick}); err != nil {
		t.Fatalf("with the password file: %v", err)
	}
	wrong := newClient(t, Config{URLs: []string{reg.URL}, Username: "sink", Password: "nope"})
	if _, err := wrong.Latest(ctx, "clicks-value"); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong password: %v, want ErrUnavailable naming 401", err)
	}
}

// TestAnswersAreBounded: an answer larger than MaxResponseBytes is cut off
// with an error instead of being read into memory.
func TestAnswersAreBounded(t *testing.T) {
	t.Parallel()
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"schema":"` + strings.Repeat("x", 2<<20) + `"}`))
	}))
	defer big.Close()
	c := newClient(t, Config{URLs: []string{big.URL}, MaxResponseBytes: 1 << 20})
	if _, err := c.SchemaByID(context.Background(), 1); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "max_response_bytes") {
		t.Errorf("a 2 MiB answer: %v, want ErrUnavailable naming max_response_bytes", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []Config{
		{URLs: []string{"127.0.0.1:8081"}},
		{Password: "x"},
		{Username: "u", Password: "x", PasswordFile: "f"},
		{CacheSize: -1},
		{MaxResponseBytes: 10},
	} {
		if err := c.WithDefaults().Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if err := (Config{}).WithDefaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestUnknownIDsAreRemembered: an ID the registry did not know is not
// asked again within Refresh, so records with a wrong ID cost one request
// per Refresh; after it, the ID is asked again.
func TestUnknownIDsAreRemembered(t *testing.T) {
	t.Parallel()
	reg := srtest.Start(t)
	ctx := context.Background()
	writer := newClient(t, Config{URLs: []string{reg.URL}})
	if _, err := writer.Register(ctx, "a", Registration{Text: avroClick}); err != nil {
		t.Fatal(err)
	}
	value := []byte{0, 0, 0, 0, 2, 2, 'a', 2} // ID 2, not yet registered
	held := newClient(t, Config{URLs: []string{reg.URL}, Refresh: time.Hour})
	fresh := newClient(t, Config{URLs: []string{reg.URL}, Refresh: time.Nanosecond})
	for _, c := range []*Client{held, fresh} {
		if _, _, _, err := c.Decode(ctx, value); !errors.Is(err, ErrUnknownSchema) {
			t.Fatalf("before ID 2 exists: %v", err)
		}
	}
	other := strings.Replace(avroClick, `"Click"`, `"Other"`, 1)
	if s, err := writer.Register(ctx, "b", Registration{Text: other}); err != nil || s.ID != 2 {
		t.Fatalf("register: ID %d, %v", s.ID, err)
	}
	if _, _, _, err := held.Decode(ctx, value); !errors.Is(err, ErrUnknownSchema) {
		t.Errorf("within Refresh: %v, want the remembered ErrUnknownSchema", err)
	}
	if _, _, v, err := fresh.Decode(ctx, value); err != nil {
		t.Errorf("after Refresh: %v %v", v, err)
	}
}

// TestTLS: an https registry is verified against the CA of Config.TLS;
// without it the system's roots refuse the test certificate.
func TestTLS(t *testing.T) {
	t.Parallel()
	reg := srtest.Start(t, srtest.TLS())
	ctx := context.Background()
	c := newClient(t, Config{URLs: []string{reg.URL}, TLS: &clientauth.TLS{CA: reg.CAFile}})
	if _, err := c.Register(ctx, "clicks-value", Registration{Text: avroClick}); err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	if _, err := newClient(t, Config{URLs: []string{reg.URL}}).Latest(ctx, "clicks-value"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("without the CA: %v, want ErrUnavailable", err)
	}
}
