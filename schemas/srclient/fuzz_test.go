package srclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"millrace/schemas/format"
	"millrace/schemas/format/avro"
)

// FuzzDecode: any value either decodes or fails with one of the classes
// a consumer acts on, never a panic. The schema of ID 1 is cached and
// every other ID is remembered as unknown, so no request is sent.
func FuzzDecode(f *testing.F) {
	schema, err := avro.Type.Parse(avroClick, nil, format.DefaultLimits)
	if err != nil {
		f.Fatal(err)
	}
	c, err := New(Config{URLs: []string{"http://127.0.0.1:1"}})
	if err != nil {
		f.Fatal(err)
	}
	c.byID.put(1, schema)
	for _, seed := range [][]byte{{0, 0, 0, 0, 1, 2, 'a', 2}, {0, 0, 0, 0, 1}, {0, 0, 0, 0, 2, 0}, []byte(`{"a":1}`), nil} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		if id, _, err := header.DecodeID(value); err == nil && id != 1 {
			c.mu.Lock()
			c.unknown[id] = time.Now()
			c.mu.Unlock()
		}
		_, _, _, err := c.Decode(context.Background(), value)
		if err != nil && !errors.Is(err, ErrNotFramed) && !errors.Is(err, ErrUndecodable) && !errors.Is(err, ErrUnknownSchema) {
			t.Fatalf("% x: unclassed error %v", value, err)
		}
	})
}
