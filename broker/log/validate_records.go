package log

// The rules a produced batch's records must pass, from the topic's config:
// Kafka's LogValidator checks, which internal/recordbatch applies while it
// walks the records (its records.go).

import (
	"math"
	"time"

	"millrace/internal/recordbatch"
)

// produceRules derives the record rules from a topic's config at now.
func produceRules(cfg Config, now time.Time) *recordbatch.Rules {
	ms := now.UnixMilli()
	return &recordbatch.Rules{
		MaxDecompressed:     cfg.MaxDecompressedBytes,
		CheckTimestamps:     cfg.MessageTimestampType != LogAppendTime,
		RefuseLogAppendTime: true,
		MinTimestamp:        saturatingAdd(ms, -boundMs(cfg.MessageTimestampBeforeMax)),
		MaxTimestamp:        saturatingAdd(ms, boundMs(cfg.MessageTimestampAfterMax)),
		RequireKeys:         cfg.Compacts(),
		MaxKeyBytes:         cfg.CompactedMaxKeyBytes,
	}
}

// boundMs is a timestamp bound in milliseconds; never (Kafka's Long.MAX,
// which a Duration cannot hold in ms) is MaxInt64, so it stays unbounded.
func boundMs(d time.Duration) int64 {
	if d == never {
		return math.MaxInt64
	}
	return d.Milliseconds()
}

// saturatingAdd adds d to t, clamping to the int64 range (before.max.ms
// defaults to Long.MAX, "unbounded").
func saturatingAdd(t, d int64) int64 {
	switch {
	case d > 0 && t > math.MaxInt64-d:
		return math.MaxInt64
	case d < 0 && t < math.MinInt64-d:
		return math.MinInt64
	}
	return t + d
}
