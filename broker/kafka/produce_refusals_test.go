package kafka

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestProduceRecordErrors: a batch with keyless records on a compacted
// topic is refused with INVALID_RECORD, the keyless records listed by
// index in the per-record errors (KIP-467) and counted in the error
// message; nothing is appended. The refusal is counted by reason and
// logged once per reason and interval, with the client and the partition.
func TestProduceRecordErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	tb := startBroker(t, withMetrics(reg))
	tb.createTopic("rec-errs", 1, map[string]string{"cleanup.policy": "compact"})
	c := dial(t, tb.addr)

	spec := plainBatch("0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
	for i := range spec.values {
		key := []byte{'k', byte('0' + i)}
		if i == 0 || i == 5 {
			key = nil
		}
		spec.keys = append(spec.keys, key)
	}
	batch := makeBatch(t, spec)
	const sends = 3
	for i := range sends {
		sp := c.produceRaw(9, "rec-errs", 0, 1, append([]byte(nil), batch...), int32(i+1))
		if sp.ErrorCode != kerr.InvalidRecord.Code {
			t.Fatalf("error %d, want INVALID_RECORD", sp.ErrorCode)
		}
		if len(sp.ErrorRecords) != 2 || sp.ErrorRecords[0].RelativeOffset != 0 || sp.ErrorRecords[1].RelativeOffset != 5 {
			t.Fatalf("record errors %+v, want records 0 and 5", sp.ErrorRecords)
		}
		for _, r := range sp.ErrorRecords {
			if r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "no key") {
				t.Fatalf("record %d: message %v", r.RelativeOffset, r.ErrorMessage)
			}
		}
		if sp.ErrorMessage == nil || !strings.Contains(*sp.ErrorMessage, "2 record(s) refused") {
			t.Fatalf("error message %v", sp.ErrorMessage)
		}
	}
	if end := tb.partitionLog("rec-errs", 0).EndOffset(); end != 0 {
		t.Fatalf("log end %d: a refused batch was appended", end)
	}
	// Produce v7 has no per-record errors: the same refusal, encoded without.
	if sp := c.produceRaw(7, "rec-errs", 0, 1, append([]byte(nil), batch...), 10); sp.ErrorCode != kerr.InvalidRecord.Code || len(sp.ErrorRecords) != 0 {
		t.Fatalf("v7: error %d, record errors %+v", sp.ErrorCode, sp.ErrorRecords)
	}
	if sp := c.produceRaw(9, "no-such-topic", 0, 1, makeBatch(t, plainBatch("x")), 11); sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: error %d", sp.ErrorCode)
	}

	refused := func(reason string) float64 {
		return testutil.ToFloat64(tb.broker.metrics.produceRefused.WithLabelValues(reason))
	}
	if n := refused("INVALID_RECORD"); n != sends+1 {
		t.Errorf("INVALID_RECORD refusals counted %v, want %d", n, sends+1)
	}
	if n := refused("UNKNOWN_TOPIC_OR_PARTITION"); n != 1 {
		t.Errorf("UNKNOWN_TOPIC_OR_PARTITION refusals counted %v, want 1", n)
	}
	out := tb.logOut.String()
	lines := 0
	for line := range strings.Lines(out) {
		if strings.Contains(line, `msg="produce refused"`) && strings.Contains(line, "reason=INVALID_RECORD") {
			lines++
			for _, want := range []string{"level=INFO", "client_id=test-client", "topic=rec-errs", "partition=0", "remote=127.0.0.1:", "records_refused=2", "no key"} {
				if !strings.Contains(line, want) {
					t.Errorf("log line lacks %q: %s", want, line)
				}
			}
		}
	}
	if lines != 1 {
		t.Errorf("%d log lines for INVALID_RECORD, want 1 (rate-limited):\n%s", lines, out)
	}
	if !strings.Contains(out, "level=DEBUG msg=\"produce refused\"") || !strings.Contains(out, "reason=UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("no debug line for the retriable refusal:\n%s", out)
	}
}

// TestProduceNoTimestampRecords: records with timestamp -1 under a batch
// maxTimestamp of 0, as librdkafka writes them, are accepted and stored
// with the batch's maxTimestamp set to -1 and a CRC that matches.
func TestProduceNoTimestampRecords(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("no-ts", 1, nil)
	c := dial(t, tb.addr)
	spec := plainBatch("a", "b")
	spec.timestamp = -1
	batch := makeBatch(t, spec)
	// makeBatch gives records i timestamp -1+i: make every delta 0, as
	// librdkafka's records without timestamp have, and the header 0.
	batch = noTimestamps(t, batch)
	if sp := c.produceRaw(9, "no-ts", 0, 1, batch, 1); sp.ErrorCode != 0 {
		t.Fatalf("error %d: %v", sp.ErrorCode, sp.ErrorMessage)
	}
	l := tb.partitionLog("no-ts", 0)
	segs := l.Segments()
	if l.EndOffset() != 2 || len(segs) != 1 || segs[0].MaxTimestamp != -1 {
		t.Fatalf("log end %d, segments %+v; want 2 records and max timestamp -1", l.EndOffset(), segs)
	}
}

// noTimestamps rewrites a makeBatch batch of uncompressed one-byte-delta
// records so every record's timestamp delta is 0 and the header's
// maxTimestamp 0, with its CRC recomputed.
func noTimestamps(t *testing.T, b []byte) []byte {
	t.Helper()
	const headerSize, offMaxTimestamp = 61, 35
	for pos := headerSize; pos < len(b); {
		length, n := binary.Varint(b[pos:])
		// attributes, then the timestamp delta: a one-byte varint here.
		if b[pos+n+1] >= 0x80 {
			t.Fatal("timestamp delta longer than a byte")
		}
		b[pos+n+1] = 0
		pos += n + int(length)
	}
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], 0)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestRefusalLogRateLimited: the first refusal of a reason is logged, the
// next within refusalLogInterval only counted, and the line after it says
// how many went unlogged; reasons are limited apart.
func TestRefusalLogRateLimited(t *testing.T) {
	var l refusalLog
	start := time.Unix(1000, 0)
	steps := []struct {
		code    int16
		at      time.Duration
		log     bool
		skipped int
	}{
		{kerr.InvalidRecord.Code, 0, true, 0},
		{kerr.InvalidRecord.Code, time.Second, false, 0},
		{kerr.InvalidRecord.Code, 2 * time.Second, false, 0},
		{kerr.InvalidTimestamp.Code, 3 * time.Second, true, 0},
		{kerr.InvalidRecord.Code, refusalLogInterval, true, 2},
		{kerr.InvalidRecord.Code, refusalLogInterval + time.Second, false, 0},
	}
	for i, s := range steps {
		log, skipped := l.due(s.code, start.Add(s.at))
		if log != s.log || skipped != s.skipped {
			t.Errorf("step %d: log %v skipped %d, want %v %d", i, log, skipped, s.log, s.skipped)
		}
	}
}
