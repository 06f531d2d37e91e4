package e2e

// Hostile requests to a broker's schema registry: each is refused with a
// 4xx and a reason, quickly, without the broker's memory growing with the
// input, and the registry serves normally afterwards.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// hostileAnswerTime bounds how long one refusal may take: the limits
// (1 MiB of schema text, 64 levels of nesting) make each a few
// milliseconds of work; the bound is for a loaded, shared machine.
const hostileAnswerTime = 5 * time.Second

// hostileRSSGrowth bounds the broker's resident memory growth over the
// whole test. The registry reads at most its body limit (1 MiB of schema
// plus a quarter and 64 KiB of slack) of any request and stops parsing at
// 64 levels, so what one request holds is a few MiB, a few times over for
// the JSON decoder's copies and Go's collector (which lets the heap double
// before collecting). 200 MiB is far above that and far below the 10 MB
// and 100,000-level inputs' cost if they were read whole or recursed
// into (a goroutine stack of 100,000 parser frames alone is tens of MiB
// per language, and a parsed 10 MB schema several times its size).
const hostileRSSGrowth = 200 << 20

// registryError is Confluent's error body.
type registryError struct {
	ErrorCode int    `json:"error_code"`
	Message   string `json:"message"`
}

// nested returns open n times, then core, then close n times.
func nested(open, core, close string, n int) string {
	return strings.Repeat(open, n) + core + strings.Repeat(close, n)
}

// nestedRecords is an Avro record holding a record n levels deep, each
// named apart (Avro refuses a name defined twice).
func nestedRecords(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"type":"record","name":"r%d","fields":[{"name":"f","type":`, i)
	}
	b.WriteString(`"null"`)
	b.WriteString(strings.Repeat("}]}", n))
	return b.String()
}

// schemaBody is a registration body with text as the schema.
func schemaBody(schemaType, text string) string {
	b, _ := json.Marshal(map[string]string{"schemaType": schemaType, "schema": text})
	return string(b)
}

// TestSchemaRegistryHostile sends a 10 MB schema, 100,000-deep schemas of
// each language, a reference cycle, garbage bodies and huge subject names
// to a broker's registry.
func TestSchemaRegistryHostile(t *testing.T) {
	t.Parallel()
	b := startRegistryBroker(t)
	rssBefore := rssKiB(t, b.broker)
	if status, body, err := srCall(b.url, http.MethodPost, "/subjects/base/versions", schemaBody("AVRO", clickV1)); err != nil || status != http.StatusOK {
		t.Fatalf("registering subject base: %d %s %v", status, body, err)
	}

	deep := 100_000
	cases := []struct {
		name, method, path, body string
		status, code             int
	}{
		{"a 10 MB Avro schema", http.MethodPost, "/subjects/big/versions",
			schemaBody("AVRO", `{"type":"record","name":"R","doc":"`+strings.Repeat("x", 10<<20)+`","fields":[]}`), 422, 42201},
		// 100,000 levels in each language, in the shortest nesting it has
		// so that the text stays under the 1 MiB limit and the depth, not
		// the size, is what is refused.
		{"Avro: 100,000 nested unions", http.MethodPost, "/subjects/deep-avro/versions",
			schemaBody("AVRO", nested("[", `"null"`, "]", deep)), 422, 42201},
		// Records in records under the JSON nesting limit (three JSON
		// levels each), refused by the registry's own depth limit of 64.
		{"Avro: 80 nested records", http.MethodPost, "/subjects/deep-records/versions",
			schemaBody("AVRO", nestedRecords(80)), 422, 42201},
		{"JSON Schema: 100,000 nested nots", http.MethodPost, "/subjects/deep-json/versions",
			schemaBody("JSON", nested(`{"not":`, "{}", "}", deep)), 422, 42201},
		{"Protobuf: 100,000 nested option values", http.MethodPost, "/subjects/deep-proto/versions",
			schemaBody("PROTOBUF", `syntax = "proto3"; message M { option (o) = `+nested("{a:", "1", "}", deep)+`; }`), 422, 42201},
		{"a lookup of a 10 MB schema", http.MethodPost, "/subjects/big",
			schemaBody("AVRO", strings.Repeat(" ", 10<<20)+`"string"`), 422, 42201},
		{"a compatibility check 100,000 deep", http.MethodPost, "/compatibility/subjects/base/versions/latest",
			schemaBody("JSON", nested(`{"not":`, "{}", "}", deep)), 422, 42201},
		// Garbage: Confluent answers a body it cannot map 422.
		{"a body that is not JSON", http.MethodPost, "/subjects/g/versions", "\x00\xff{{{not json", 422, 42201},
		{"a truncated body", http.MethodPost, "/subjects/g/versions", `{"schema": "{\"type\":`, 422, 42201},
		{"a schema that is a number", http.MethodPost, "/subjects/g/versions", `{"schema": 5}`, 422, 42201},
		{"an unknown schemaType", http.MethodPost, "/subjects/g/versions", `{"schemaType":"XML","schema":"<a/>"}`, 422, 42201},
		{"a schema that is not Avro", http.MethodPost, "/subjects/g/versions", `{"schema":"{\"type\":\"recrod\"}"}`, 422, 42201},
		{"a reference to nothing", http.MethodPost, "/subjects/g/versions",
			`{"schema":"\"x.Y\"","references":[{"name":"x.Y","subject":"nobody","version":1}]}`, 422, 42201},
		{"a huge id in IMPORT's place", http.MethodPost, "/subjects/g/versions", `{"schema":"\"string\"","id":99999999999999999999}`, 422, 42201},
		{"a config that is garbage", http.MethodPut, "/config", `{"compatibility":[1,2,3]}`, 422, 42203},
		{"a mode that is garbage", http.MethodPut, "/mode", `{"mode":"SIDEWAYS"}`, 422, 42204},
		{"a version that is no number", http.MethodGet, "/subjects/g/versions/1e99", "", 422, 42202},
		{"an id that is no number", http.MethodGet, "/schemas/ids/" + strings.Repeat("9", 400), "", 404, 40403},
		// Go's server refuses a request line over its 1 MiB header limit
		// before the registry sees it.
		{"a 2 MiB subject name", http.MethodPost, "/subjects/" + strings.Repeat("s", 2<<20) + "/versions", `{"schema":"\"string\""}`, 431, 0},
	}
	for _, c := range cases {
		start := time.Now()
		status, body, err := srCall(b.url, c.method, c.path, c.body)
		took := time.Since(start)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		t.Logf("%s: %d in %v: %.160s", c.name, status, took.Round(time.Millisecond), body)
		if status != c.status || took > hostileAnswerTime {
			t.Errorf("%s: answered %d in %v: %.300s; want %d within %v", c.name, status, took, body, c.status, hostileAnswerTime)
			continue
		}
		if c.code == 0 {
			continue
		}
		var e registryError
		if json.Unmarshal([]byte(body), &e) != nil || e.ErrorCode != c.code || len(e.Message) < 10 {
			t.Errorf("%s: body %.300s; want error_code %d and a reason", c.name, body, c.code)
		}
	}

	checkHugeSubject(t, b)
	checkNoReferenceCycle(t, b)
	checkStoredCycle(t, b)

	// It still serves, and the broker did not keep what it was sent.
	if status, body, err := srCall(b.url, http.MethodPost, "/subjects/after/versions", schemaBody("AVRO", clickV1)); err != nil || status != http.StatusOK {
		t.Fatalf("a registration after the hostile requests: %d %s %v", status, body, err)
	}
	grew := (rssKiB(t, b.broker) - rssBefore) << 10
	peak := (peakRSSKiB(t, b.pid()) - rssBefore) << 10
	t.Logf("broker RSS grew %d MiB (peak %d MiB above the start)", grew>>20, peak>>20)
	if peak > hostileRSSGrowth {
		t.Errorf("the broker's peak RSS rose %d MiB above its start; want at most %d MiB", peak>>20, hostileRSSGrowth>>20)
	}
}

// checkHugeSubject: a subject name of 64 KiB, within the request line
// limit, is refused as an invalid subject (it would make keys longer than
// the _schemas topic takes), and the subject list stays readable.
func checkHugeSubject(t *testing.T, b *registryBroker) {
	t.Helper()
	huge := strings.Repeat("h", 64<<10)
	start := time.Now()
	status, body, err := srCall(b.url, http.MethodPost, "/subjects/"+huge+"/versions", `{"schema":"\"string\""}`)
	if err != nil || time.Since(start) > hostileAnswerTime {
		t.Fatalf("a 64 KiB subject name: %v after %v", err, time.Since(start))
	}
	if status != 422 || !strings.Contains(body, "42208") {
		t.Errorf("a 64 KiB subject name: answered %d %.200s; want 422 with error_code 42208", status, body)
	}
	if status, _, err := srCall(b.url, http.MethodGet, "/subjects", ""); err != nil || status != http.StatusOK {
		t.Errorf("GET /subjects after a huge subject: %d %v", status, err)
	}
}

// checkNoReferenceCycle tries to close a reference cycle through the API
// (subject cyc-a version 1 referencing cyc-b, which references cyc-a
// version 1): a reference must name an existing version, so the cycle
// needs cyc-a version 1 replaced or deleted and made again once cyc-b
// references it, and the registry refuses each of those steps.
func checkNoReferenceCycle(t *testing.T, b *registryBroker) {
	t.Helper()
	mustCall := func(what, method, path, body string, status, code int) {
		t.Helper()
		got, resp, err := srCall(b.url, method, path, body)
		var e registryError
		json.Unmarshal([]byte(resp), &e)
		if err != nil || got != status || (code != 0 && e.ErrorCode != code) {
			t.Fatalf("%s: %d %s %v; want %d (error_code %d)", what, got, resp, err, status, code)
		}
	}
	a1 := `{"type":"record","name":"A","namespace":"cyc","fields":[]}`
	b1 := `{"type":"record","name":"B","namespace":"cyc","fields":[{"name":"a","type":"cyc.A"}]}`
	aToB := `{"type":"record","name":"A","namespace":"cyc","fields":[{"name":"b","type":"cyc.B"}]}`
	refB := `[{"name":"cyc.B","subject":"cyc-b","version":1}]`
	mustCall("subject-level IMPORT mode", http.MethodPut, "/mode/cyc-a", `{"mode":"IMPORT"}`, 200, 0)
	mustCall("a referencing an unborn version of itself", http.MethodPost, "/subjects/cyc-a/versions",
		`{"id":7001,"version":1,"schema":`+strconv.Quote(aToB)+`,"references":[{"name":"cyc.B","subject":"cyc-a","version":1}]}`, 422, 42201)
	mustCall("cyc-a version 1", http.MethodPost, "/subjects/cyc-a/versions", `{"id":7001,"version":1,"schema":`+strconv.Quote(a1)+`}`, 200, 0)
	mustCall("cyc-b version 1 referencing cyc-a version 1", http.MethodPost, "/subjects/cyc-b/versions",
		`{"schema":`+strconv.Quote(b1)+`,"references":[{"name":"cyc.A","subject":"cyc-a","version":1}]}`, 200, 0)
	// A schema closing the cycle is refused whatever the registry checks
	// first: Avro itself refuses it (cyc.B brings a definition of cyc.A
	// that the new text defines again, 42201), and so would the overwrite
	// of an existing version or ID (42205).
	mustCall("replacing cyc-a version 1 with one referencing cyc-b", http.MethodPost, "/subjects/cyc-a/versions",
		`{"id":7002,"version":1,"schema":`+strconv.Quote(aToB)+`,"references":`+refB+`}`, 422, 0)
	mustCall("reusing cyc-a's ID for a schema referencing cyc-b", http.MethodPost, "/subjects/cyc-a/versions",
		`{"id":7001,"version":2,"schema":`+strconv.Quote(aToB)+`,"references":`+refB+`}`, 422, 0)
	mustCall("deleting the referenced cyc-a version 1", http.MethodDelete, "/subjects/cyc-a/versions/1", "", 422, 42206)
	mustCall("deleting the referenced subject cyc-a", http.MethodDelete, "/subjects/cyc-a", "", 422, 42206)
}

// checkStoredCycle writes a reference cycle straight into the _schemas
// topic, as a broken or hostile writer could: the registry must still
// answer reads of it and refuse a registration that references it.
func checkStoredCycle(t *testing.T, b *registryBroker) {
	t.Helper()
	record := func(subject string, id int, text, refName, refSubject string) *kgo.Record {
		key := fmt.Sprintf(`{"keytype":"SCHEMA","subject":%q,"version":1,"magic":1}`, subject)
		value, _ := json.Marshal(map[string]any{"subject": subject, "version": 1, "id": id, "schema": text, "deleted": false,
			"references": []map[string]any{{"name": refName, "subject": refSubject, "version": 1}}})
		return &kgo.Record{Topic: "_schemas", Key: []byte(key), Value: value}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := b.client(t).ProduceSync(ctx,
		record("loop-x", 9001, `{"type":"record","name":"X","namespace":"loop","fields":[{"name":"y","type":"loop.Y"}]}`, "loop.Y", "loop-y"),
		record("loop-y", 9002, `{"type":"record","name":"Y","namespace":"loop","fields":[{"name":"x","type":"loop.X"}]}`, "loop.X", "loop-x"),
	).FirstErr()
	if err != nil {
		t.Fatalf("writing a cycle into _schemas: %v", err)
	}
	// The view takes the records in (or drops them); either way reads
	// answer, and the next write waits for the view to reach the end.
	waitfor.Until(t, 20*time.Second, "the registry to answer GET /schemas/ids/9001 after the stored cycle", func() bool {
		status, _, err := srCall(b.url, http.MethodGet, "/schemas/ids/9001", "")
		return err == nil && (status == 200 || status == 404)
	})
	start := time.Now()
	status, body, err := srCall(b.url, http.MethodPost, "/subjects/loop-z/versions",
		`{"schema":"{\"type\":\"record\",\"name\":\"Z\",\"namespace\":\"loop\",\"fields\":[{\"name\":\"x\",\"type\":\"loop.X\"}]}","references":[{"name":"loop.X","subject":"loop-x","version":1}]}`)
	if err != nil || status != 422 || !strings.Contains(body, "42201") || time.Since(start) > hostileAnswerTime {
		t.Errorf("a registration referencing the stored cycle: %d %s %v after %v; want 422 42201 at once", status, body, err, time.Since(start))
	}
	t.Logf("a registration referencing the stored cycle: %d %s", status, body)
	for _, path := range []string{"/subjects", "/schemas", "/subjects/loop-x/versions/1/referencedby", "/subjects/loop-y/versions/latest"} {
		if status, body, err := srCall(b.url, http.MethodGet, path, ""); err != nil || status/100 == 5 {
			t.Errorf("GET %s after the stored cycle: %d %.200s %v", path, status, body, err)
		}
	}
}
