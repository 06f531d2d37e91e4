package log

import (
	"errors"
	"math"
	"testing"
	"time"

	"millrace/internal/recordbatch"
	"millrace/internal/recordbatch/batchtest"
)

// storedRules walk batches read back from a log: they were produced, so
// their records must walk, but LogAppendTime may have been applied.
var storedRules = &recordbatch.Rules{MaxDecompressed: math.MaxInt64}

func validateAt(b []byte, cfg Config, now int64) error {
	_, err := testDecoder.Validate(b, cfg.MaxMessageBytes, produceRules(cfg, time.UnixMilli(now)))
	return err
}

func TestTimestampBounds(t *testing.T) {
	const now = batchtest.FuzzNow
	hour := time.Hour.Milliseconds()
	at := func(ts int64) []byte { return batchtest.Build([]batchtest.Record{{Value: []byte("x")}}, ts, 0) }
	bounded := DefaultConfig()
	bounded.MessageTimestampBeforeMax = 24 * time.Hour
	unbounded := DefaultConfig()
	if err := unbounded.Set("message.timestamp.after.max.ms", "9223372036854775807"); err != nil {
		t.Fatal(err)
	}
	logAppend := DefaultConfig()
	logAppend.MessageTimestampType = LogAppendTime
	cases := []struct {
		name  string
		cfg   Config
		batch []byte
		ok    bool
	}{
		{"an hour ahead, the default bound", DefaultConfig(), at(now + hour), true},
		{"past the default bound", DefaultConfig(), at(now + hour + 1), false},
		{"1970, before.max unbounded by default", DefaultConfig(), at(0), true},
		{"no timestamp (-1)", DefaultConfig(), at(-1), true},
		{"a day behind with before.max 1 day", bounded, at(now - 24*hour), true},
		{"older with before.max 1 day", bounded, at(now - 24*hour - 1), false},
		{"LogAppendTime topic: not checked", logAppend, at(now + 100*hour), true},
		{"year 9999 with after.max Long.MAX", unbounded, at(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()), true},
		{"year 1 with before.max Long.MAX (the default)", DefaultConfig(), at(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()), true},
		{"second record out of range", DefaultConfig(), batchtest.Build([]batchtest.Record{{Value: []byte("x")}, {TSDelta: 2 * hour}}, now, 0), false},
	}
	for _, c := range cases {
		err := validateAt(c.batch, c.cfg, now)
		if c.ok && err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrInvalidTimestamp) {
			t.Errorf("%s: got %v, want ErrInvalidTimestamp", c.name, err)
		}
	}
}

// TestDefaultMaxDecompressedBytes: the codec's default bound, which a sink
// validates consumed batches under, is the topic default's.
func TestDefaultMaxDecompressedBytes(t *testing.T) {
	if got, want := int64(recordbatch.DefaultMaxDecompressedBytes), DefaultConfig().MaxDecompressedBytes; got != want {
		t.Fatalf("recordbatch.DefaultMaxDecompressedBytes %d, millrace.max.decompressed.bytes default %d", got, want)
	}
}
