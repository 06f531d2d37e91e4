package e2e

// The schema registry a broker hosts (schema.registry.listeners), driven by
// real clients over HTTP: franz-go's pkg/sr, confluent-kafka-python's
// SchemaRegistryClient and Avro producer, and KafkaJS's
// @kafkajs/confluent-schema-registry, each also producing and consuming
// records framed with the IDs the registry gave.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"millrace/internal/waitfor"
)

// registryBroker is a broker whose schema registry serves at url.
type registryBroker struct {
	*broker
	url string
}

// startRegistryBroker runs a broker with its registry on a free port and
// waits until the registry is primary: a write is accepted.
func startRegistryBroker(t *testing.T) *registryBroker {
	t.Helper()
	url := "http://127.0.0.1:" + strconv.Itoa(freePort(t))
	b := &registryBroker{broker: startBroker(t, "--set", "schema.registry.listeners="+url), url: url}
	waitRegistryPrimary(t, b.process, url)
	return b
}

// waitRegistryPrimary waits until the registry at url takes a write (the
// global config, set to what it is by default), which it does once it is
// primary or knows the primary to forward to.
func waitRegistryPrimary(t *testing.T, p *process, url string) {
	t.Helper()
	var last string
	defer reportLastSeen(t, func() string { return last })()
	waitfor.Until(t, 30*time.Second, "the schema registry at "+url+" to take a write", func() bool {
		if p != nil {
			p.exitedEarly("its schema registry took a write")
		}
		code, body, err := srCall(url, http.MethodPut, "/config", `{"compatibility":"BACKWARD"}`)
		last = fmt.Sprintf("%d %s %v", code, body, err)
		return err == nil && code == http.StatusOK
	})
}

// srHTTP is the client of the raw HTTP calls; its timeout bounds a call
// to a registry that hangs.
var srHTTP = &http.Client{Timeout: 15 * time.Second}

// srCall sends one request to a registry (body as JSON when not empty) and
// returns the status and the body.
func srCall(base, method, path, body string) (int, string, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	}
	resp, err := srHTTP.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), err
}

// srClient is a franz-go registry client of url.
func srClient(t *testing.T, url string) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// srCode is the registry's error_code of err, 0 if it is none.
func srCode(err error) int {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return 0
}

// clickV1 and clickV2 are an Avro record and a BACKWARD-compatible second
// version (a field with a default); clickBad turns n from long into
// string, which BACKWARD refuses (Avro resolution promotes long only to
// float and double).
const (
	clickV1  = `{"type":"record","name":"Click","namespace":"e2e","fields":[{"name":"user","type":"string"},{"name":"n","type":"long"}]}`
	clickV2  = `{"type":"record","name":"Click","namespace":"e2e","fields":[{"name":"user","type":"string"},{"name":"n","type":"long"},{"name":"page","type":"string","default":""}]}`
	clickBad = `{"type":"record","name":"Click","namespace":"e2e","fields":[{"name":"user","type":"string"},{"name":"n","type":"string"},{"name":"page","type":"string","default":""}]}`
)

// TestSchemaRegistryFranzGo calls every endpoint of franz-go's sr.Client
// that Confluent's registry serves (not contexts or GUIDs, which are
// Confluent Platform 8 features) against a broker's registry, then
// encodes Avro records with sr.Serde, produces and consumes them with kgo
// and decodes them.
func TestSchemaRegistryFranzGo(t *testing.T) {
	t.Parallel()
	b := startRegistryBroker(t)
	cl := srClient(t, b.url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	types, err := cl.SupportedTypes(ctx)
	if err != nil || !slices.Contains(types, sr.TypeAvro) || !slices.Contains(types, sr.TypeProtobuf) || !slices.Contains(types, sr.TypeJSON) {
		t.Fatalf("SupportedTypes = %v, %v; want AVRO, PROTOBUF and JSON", types, err)
	}

	// One schema under two subjects: one ID, version 1 of each.
	v1, err := cl.CreateSchema(ctx, "clicks-value", sr.Schema{Schema: clickV1})
	if err != nil {
		t.Fatal(err)
	}
	other, err := cl.CreateSchema(ctx, "mirror-value", sr.Schema{Schema: clickV1})
	if err != nil {
		t.Fatal(err)
	}
	if v1.Version != 1 || other.Version != 1 || other.ID != v1.ID {
		t.Fatalf("one schema under two subjects: %+v and %+v; want version 1 each and one ID", v1, other)
	}
	again, err := cl.CreateSchema(ctx, "clicks-value", sr.Schema{Schema: clickV1})
	if err != nil || again.ID != v1.ID || again.Version != 1 {
		t.Fatalf("registering the same schema again = %+v, %v; want ID %d version 1", again, err, v1.ID)
	}
	v2, err := cl.CreateSchema(ctx, "clicks-value", sr.Schema{Schema: clickV2})
	if err != nil || v2.Version != 2 || v2.ID == v1.ID {
		t.Fatalf("a compatible second version = %+v, %v; want version 2 with a new ID", v2, err)
	}
	if _, err := cl.CreateSchema(ctx, "clicks-value", sr.Schema{Schema: clickBad}); srCode(err) != 409 {
		t.Fatalf("an incompatible version: %v; want 409", err)
	}

	if s, err := cl.SchemaByID(ctx, v1.ID); err != nil || s.Type != sr.TypeAvro || !strings.Contains(s.Schema, `"Click"`) {
		t.Fatalf("SchemaByID(%d) = %+v, %v", v1.ID, s, err)
	}
	if text, err := cl.SchemaTextByID(ctx, v2.ID); err != nil || !strings.Contains(text, `"page"`) {
		t.Fatalf("SchemaTextByID(%d) = %q, %v", v2.ID, text, err)
	}
	if subs, err := cl.SubjectsByID(ctx, v1.ID); err != nil || !slices.Equal(subs, []string{"clicks-value", "mirror-value"}) {
		t.Fatalf("SubjectsByID(%d) = %v, %v", v1.ID, subs, err)
	}
	if svs, err := cl.SchemaVersionsByID(ctx, v1.ID); err != nil || len(svs) != 2 {
		t.Fatalf("SchemaVersionsByID(%d) = %v, %v; want both subjects' version 1", v1.ID, svs, err)
	}
	if got, err := cl.SchemaByVersion(ctx, "clicks-value", -1); err != nil || got.Version != 2 || got.ID != v2.ID {
		t.Fatalf("SchemaByVersion(latest) = %+v, %v", got, err)
	}
	if text, err := cl.SchemaTextByVersion(ctx, "clicks-value", 1); err != nil || strings.Contains(text, "page") {
		t.Fatalf("SchemaTextByVersion(1) = %q, %v", text, err)
	}
	if vs, err := cl.SubjectVersions(ctx, "clicks-value"); err != nil || !slices.Equal(vs, []int{1, 2}) {
		t.Fatalf("SubjectVersions = %v, %v", vs, err)
	}
	if ss, err := cl.Schemas(ctx, "clicks-value"); err != nil || len(ss) != 2 || ss[0].ID != v1.ID || ss[1].ID != v2.ID {
		t.Fatalf("Schemas = %+v, %v", ss, err)
	}
	if all, err := cl.AllSchemas(ctx); err != nil || len(all) != 3 {
		t.Fatalf("AllSchemas = %+v, %v; want 3 subject-versions", all, err)
	}
	if subs, err := cl.Subjects(ctx); err != nil || !slices.Equal(subs, []string{"clicks-value", "mirror-value"}) {
		t.Fatalf("Subjects = %v, %v", subs, err)
	}
	if got, err := cl.LookupSchema(ctx, "clicks-value", sr.Schema{Schema: clickV1}); err != nil || got.Version != 1 || got.ID != v1.ID {
		t.Fatalf("LookupSchema(v1) = %+v, %v", got, err)
	}
	if _, err := cl.LookupSchema(ctx, "clicks-value", sr.Schema{Schema: clickBad}); srCode(err) != 40403 {
		t.Fatalf("LookupSchema(an unregistered schema): %v; want 40403", err)
	}

	// Compatibility checks, verbose: the refusal says why.
	res, err := cl.CheckCompatibility(sr.WithParams(ctx, sr.Verbose), "clicks-value", -1, sr.Schema{Schema: clickBad})
	if err != nil || res.Is || len(res.Messages) == 0 {
		t.Fatalf("CheckCompatibility(incompatible, verbose) = %+v, %v; want false with messages", res, err)
	}
	if res, err := cl.CheckCompatibility(ctx, "clicks-value", 2, sr.Schema{Schema: clickV2}); err != nil || !res.Is {
		t.Fatalf("CheckCompatibility(same schema) = %+v, %v", res, err)
	}

	// Config: set a subject's level, read it and the global one, reset.
	if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "clicks-value"); r[0].Err != nil || r[0].Level != sr.CompatNone {
		t.Fatalf("SetCompatibility(NONE) = %+v", r[0])
	}
	levels := cl.Compatibility(ctx, "clicks-value", "")
	if levels[0].Err != nil || levels[0].Level != sr.CompatNone || levels[1].Err != nil || levels[1].Level != sr.CompatBackward {
		t.Fatalf("Compatibility(subject, global) = %+v", levels)
	}
	if r := cl.ResetCompatibility(ctx, "clicks-value"); r[0].Err != nil {
		t.Fatalf("ResetCompatibility = %+v", r[0])
	}
	// With the subject's level gone, Confluent answers 40408 unless asked
	// to fall back to the global one (defaultToGlobal).
	if r := cl.Compatibility(ctx, "clicks-value"); srCode(r[0].Err) != 40408 {
		t.Fatalf("Compatibility after the reset = %+v; want 40408", r[0])
	}

	// Mode: READONLY refuses a write; reset to the global READWRITE.
	if r := cl.SetMode(ctx, sr.ModeReadOnly, "mirror-value"); r[0].Err != nil || r[0].Mode != sr.ModeReadOnly {
		t.Fatalf("SetMode(READONLY) = %+v", r[0])
	}
	if m := cl.Mode(ctx, "mirror-value", ""); m[0].Mode != sr.ModeReadOnly || m[1].Err != nil || m[1].Mode != sr.ModeReadWrite {
		t.Fatalf("Mode(subject, global) = %+v", m)
	}
	if _, err := cl.CreateSchema(ctx, "mirror-value", sr.Schema{Schema: clickV2}); srCode(err) != 42205 {
		t.Fatalf("a write to a READONLY subject: %v; want 42205", err)
	}
	if r := cl.ResetMode(ctx, "mirror-value"); r[0].Err != nil {
		t.Fatalf("ResetMode = %+v", r[0])
	}

	// References: an Avro record naming e2e.Click; referencedby lists it.
	withRef, err := cl.CreateSchema(ctx, "session-value", sr.Schema{
		Schema:     `{"type":"record","name":"Session","namespace":"e2e","fields":[{"name":"last","type":"e2e.Click"}]}`,
		References: []sr.SchemaReference{{Name: "e2e.Click", Subject: "clicks-value", Version: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if refs, err := cl.SchemaReferences(ctx, "clicks-value", 1); err != nil || len(refs) != 1 || refs[0].ID != withRef.ID {
		t.Fatalf("SchemaReferences(clicks-value 1) = %+v, %v; want ID %d", refs, err, withRef.ID)
	}
	if err := cl.DeleteSchema(ctx, "clicks-value", 1, sr.SoftDelete); srCode(err) != 42206 {
		t.Fatalf("deleting a referenced version: %v; want 42206", err)
	}

	// Deletes: a version soft then permanently; a subject likewise.
	if err := cl.DeleteSchema(ctx, "clicks-value", 2, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if vs, _ := cl.SubjectVersions(ctx, "clicks-value"); !slices.Equal(vs, []int{1}) {
		t.Fatalf("versions after a soft delete = %v; want [1]", vs)
	}
	if err := cl.DeleteSchema(ctx, "clicks-value", 2, sr.HardDelete); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.DeleteSubject(ctx, "mirror-value", sr.HardDelete); srCode(err) != 40405 {
		t.Fatalf("a permanent delete before the soft one: %v; want 40405", err)
	}
	if vs, err := cl.DeleteSubject(ctx, "mirror-value", sr.SoftDelete); err != nil || !slices.Equal(vs, []int{1}) {
		t.Fatalf("DeleteSubject(soft) = %v, %v", vs, err)
	}
	if subs, _ := cl.Subjects(ctx); slices.Contains(subs, "mirror-value") {
		t.Fatalf("Subjects after the soft delete = %v", subs)
	}
	if subs, _ := cl.Subjects(sr.WithParams(ctx, sr.ShowDeleted)); !slices.Contains(subs, "mirror-value") {
		t.Fatalf("Subjects(deleted=true) = %v; want mirror-value", subs)
	}
	if vs, err := cl.DeleteSubject(ctx, "mirror-value", sr.HardDelete); err != nil || !slices.Equal(vs, []int{1}) {
		t.Fatalf("DeleteSubject(permanent) = %v, %v", vs, err)
	}
	// The ID stays: clicks-value version 1 still holds it.
	if s, err := cl.SchemaByID(ctx, v1.ID); err != nil || !strings.Contains(s.Schema, "Click") {
		t.Fatalf("SchemaByID(%d) after the deletes = %+v, %v", v1.ID, s, err)
	}

	roundTripAvro(t, b, cl, v1.ID)
}

// click is a record of clickV1.
type click struct {
	User string `avro:"user"`
	N    int64  `avro:"n"`
}

// roundTripAvro encodes records of clickV1 (ID id) with sr.Serde, produces
// them, consumes them and decodes them.
func roundTripAvro(t *testing.T, b *registryBroker, cl *sr.Client, id int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := cl.SchemaByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := avro.Parse(s.Schema)
	if err != nil {
		t.Fatal(err)
	}
	var serde sr.Serde
	serde.Register(id, click{},
		sr.EncodeFn(func(v any) ([]byte, error) { return schema.Encode(v) }),
		sr.DecodeFn(func(b []byte, v any) error { _, err := schema.Decode(b, v); return err }))

	const topic, n = "clicks", 5
	b.createTopic(t, topic, 1, nil)
	producer := b.client(t)
	for i := range n {
		value, err := serde.Encode(click{User: "u" + strconv.Itoa(i), N: int64(i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumer := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []click
	for len(got) < n {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming after %d records: %v", len(got), err)
		}
		for _, r := range fs.Records() {
			if r.Value[0] != 0 || int(binary.BigEndian.Uint32(r.Value[1:5])) != id {
				t.Fatalf("record %d is framed % x; want magic byte 0 and ID %d", len(got), r.Value[:5], id)
			}
			var c click
			if err := serde.Decode(r.Value, &c); err != nil {
				t.Fatal(err)
			}
			got = append(got, c)
		}
	}
	for i, c := range got {
		if c != (click{User: "u" + strconv.Itoa(i), N: int64(i)}) {
			t.Fatalf("record %d decoded as %+v", i, c)
		}
	}
}
