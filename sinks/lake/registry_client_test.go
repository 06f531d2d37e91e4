package lake

import (
	"errors"
	"testing"

	"millrace/schemas/srclient"
	"millrace/schemas/srclient/srtest"
)

// TestRegistryClientFaults: the worker's own registry client, against a
// real registry: a framed value decodes; an unframed one, a garbled one
// and one of an ID the registry does not know are the record's faults
// (dead letters); a registry that cannot be reached is not (a stop).
func TestRegistryClientFaults(t *testing.T) {
	t.Parallel()
	reg := srtest.Start(t)
	rc, err := newRegistryClient(RegistryConfig{Config: srclient.Config{URLs: []string{reg.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	const schema = `{"type":"record","name":"order","fields":[{"name":"sku","type":"string"}]}`
	sub, err := rc.client.Register(t.Context(), "orders-value", srclient.Registration{Text: schema})
	if err != nil {
		t.Fatal(err)
	}
	value, err := rc.client.Encode(t.Context(), "orders-value", map[string]any{"sku": "a-1"})
	if err != nil {
		t.Fatal(err)
	}
	id, _, v, err := rc.Decode(value)
	if err != nil || id != sub.ID || v.(map[string]any)["sku"] != "a-1" {
		t.Fatalf("Decode: %d %v %v, want ID %d and sku a-1", id, v, err, sub.ID)
	}
	if latest, _, err := rc.Latest(t.Context(), "orders-value"); err != nil || latest != sub.ID {
		t.Errorf("Latest: %d %v, want %d", latest, err, sub.ID)
	}
	unknown := append([]byte{0, 0, 0, 0, 99}, value[5:]...)
	for _, tc := range []struct {
		name  string
		value []byte
		want  error
	}{
		{"unframed", []byte(`{"sku":"a-1"}`), ErrUndecodable},
		{"garbled", append(value[:5:5], 0xff, 0xff), ErrUndecodable},
		{"unknown ID", unknown, ErrUnknownSchema},
	} {
		if _, _, _, err := rc.Decode(tc.value); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, _, err := rc.Latest(t.Context(), "nobody-value"); !errors.Is(err, ErrUnknownSchema) {
		t.Errorf("Latest of a subject without versions: %v, want ErrUnknownSchema", err)
	}

	reg.Close()
	fresh := append([]byte{0, 0, 0, 0, 42}, value[5:]...)
	_, _, _, err = rc.Decode(fresh)
	if err == nil || errors.Is(err, ErrUnknownSchema) || errors.Is(err, ErrUndecodable) {
		t.Errorf("Decode with the registry down: %v, want an error that is not the record's fault", err)
	}
}
