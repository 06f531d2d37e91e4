package kafka

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/log"

	"millrace/internal/recordbatch"
)

// TestProduceConsumeCodecs round-trips records through franz-go producers
// and consumers with every compression codec.
func TestProduceConsumeCodecs(t *testing.T) {
	tb := startBroker(t)
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			tb.createTopic(topic, 1, nil)
			ctx := testContext(t)
			prod := newClient(t, tb.addr, kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(50*time.Millisecond))
			const n = 200
			var want []string
			for i := range n {
				// franz-go sends a batch uncompressed when compressing does
				// not shrink it (a lone short record under gzip, when the
				// linger ends early on a loaded machine), so every record is
				// compressible on its own.
				v := fmt.Sprintf("%s record %d %s", name, i, bytes.Repeat([]byte("x"), 200+i%50))
				want = append(want, v)
				prod.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
			}
			if err := prod.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			cons := newClient(t, tb.addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			var got []string
			for len(got) < n {
				fs := cons.PollFetches(ctx)
				if err := fs.Err(); err != nil {
					t.Fatalf("poll: %v", err)
				}
				fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("record %d = %q, want %q", i, got[i], want[i])
				}
			}
			// The log holds the batches compressed as they were sent.
			data := readAll(t, tb.partitionLog(topic, 0))
			for _, h := range batchesIn(t, data) {
				if want := codecNumber(name); h.Compression() != want {
					t.Fatalf("stored batch has codec %d, want %d", h.Compression(), want)
				}
			}
		})
	}
}

func codecNumber(name string) int {
	return map[string]int{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[name]
}

// readAll reads a whole partition log.
func readAll(t testing.TB, l *log.Log) []byte {
	t.Helper()
	var out []byte
	for off := l.StartOffset(); off < l.EndOffset(); {
		s, err := l.Read(off, 1<<20, l.EndOffset())
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.ReadAll()
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
		if s.NextOffset() <= off {
			break
		}
		off = s.NextOffset()
	}
	return out
}

// TestProduceStoresBatchesVerbatim sends compressed batches built here and
// checks the log holds exactly those bytes, apart from the two header fields
// the leader assigns (base offset and partition leader epoch).
func TestProduceStoresBatchesVerbatim(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("verbatim", 1, nil)
	c := dial(t, tb.addr)
	var sent [][]byte
	for i, codec := range []int16{0, 1, 2, 4} {
		spec := plainBatch("alpha", "beta", "gamma", string(bytes.Repeat([]byte("compressible "), 40)))
		spec.codec = codec
		batch := makeBatch(t, spec)
		sent = append(sent, append([]byte(nil), batch...))
		rp := c.produceRaw(9, "verbatim", 0, 1, batch, int32(i+1))
		if rp.ErrorCode != 0 || rp.BaseOffset != int64(4*i) {
			t.Fatalf("codec %d: error %d, base offset %d", codec, rp.ErrorCode, rp.BaseOffset)
		}
	}
	stored := readAll(t, tb.partitionLog("verbatim", 0))
	pos := 0
	for i, want := range sent {
		got := stored[pos : pos+len(want)]
		if h, _ := recordbatch.ParseHeader(got); h.BaseOffset != int64(4*i) {
			t.Fatalf("batch %d stored at base offset %d", i, h.BaseOffset)
		}
		if !bytes.Equal(got[16:], want[16:]) || !bytes.Equal(got[8:12], want[8:12]) {
			t.Fatalf("batch %d (codec %d) was not stored verbatim", i, want[22]&7)
		}
		pos += len(want)
	}
	if pos != len(stored) {
		t.Fatalf("log holds %d bytes, sent %d", len(stored), pos)
	}
}

// TestProduceAcks covers acks 0, 1 and all, and an invalid acks value.
func TestProduceAcks(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("acks", 1, nil)
	l := tb.partitionLog("acks", 0)

	c := dial(t, tb.addr)
	// acks=0: no response; the next request's response is the next frame.
	c.produceRaw(9, "acks", 0, 0, makeBatch(t, plainBatch("zero")), 1)
	c.apiVersionsOK(2)
	if l.EndOffset() != 1 {
		t.Fatalf("acks=0 produce: log end %d, want 1", l.EndOffset())
	}
	for i, acks := range []int16{1, -1} {
		rp := c.produceRaw(9, "acks", 0, acks, makeBatch(t, plainBatch("x")), int32(10+i))
		if rp.ErrorCode != 0 || rp.BaseOffset != int64(1+i) || rp.LogStartOffset != 0 || rp.LogAppendTime != -1 {
			t.Fatalf("acks=%d: %+v", acks, rp)
		}
	}
	if rp := c.produceRaw(9, "acks", 0, 2, makeBatch(t, plainBatch("x")), 20); rp.ErrorCode != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: error %d", rp.ErrorCode)
	}
	// acks=0 with an error closes the connection, as Kafka does.
	c.produceRaw(9, "no-such-topic", 0, 0, makeBatch(t, plainBatch("x")), 21)
	c.expectClosed()

	// franz-go with acks=1 (non-idempotent) and acks=all (idempotent).
	ctx := testContext(t)
	for _, opts := range [][]kgo.Opt{
		{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()},
		{kgo.RequiredAcks(kgo.AllISRAcks())},
	} {
		cl := newClient(t, tb.addr, append(opts, kgo.DefaultProduceTopic("acks"))...)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if l.EndOffset() != 5 {
		t.Fatalf("log end %d, want 5", l.EndOffset())
	}
}

// attrTransactional and attrControl are record batch attribute bits.
const (
	attrTransactional = 0x10
	attrControl       = 0x20
)

// TestProduceErrors maps bad requests to Kafka error codes and appends
// nothing for them.
func TestProduceErrors(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("errs", 1, map[string]string{"max.message.bytes": "2000"})
	l := tb.partitionLog("errs", 0)
	c := dial(t, tb.addr)

	good := makeBatch(t, plainBatch("ok"))
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff
	oldMagic := append([]byte(nil), good...)
	oldMagic[16] = 1
	big := makeBatch(t, plainBatch(string(bytes.Repeat([]byte("b"), 3000))))
	txn := plainBatch("t")
	txn.producer, txn.epoch, txn.sequence, txn.attrs = 1, 0, 0, attrTransactional
	control := txn
	control.attrs = attrControl
	two := append(makeBatch(t, plainBatch("a")), makeBatch(t, plainBatch("b"))...)

	cases := []struct {
		name  string
		topic string
		part  int32
		batch []byte
		code  int16
	}{
		{"unknown topic", "nope", 0, good, kerr.UnknownTopicOrPartition.Code},
		{"unknown partition", "errs", 7, good, kerr.UnknownTopicOrPartition.Code},
		{"bad crc", "errs", 0, badCRC, kerr.CorruptMessage.Code},
		{"magic 1", "errs", 0, oldMagic, kerr.UnsupportedForMessageFormat.Code},
		{"too large", "errs", 0, big, kerr.MessageTooLarge.Code},
		{"transactional without a transactional ID", "errs", 0, makeBatch(t, txn), kerr.TransactionalIDAuthorizationFailed.Code},
		{"control batch", "errs", 0, makeBatch(t, control), kerr.InvalidRecord.Code},
		{"two batches", "errs", 0, two, kerr.InvalidRecord.Code},
		{"empty", "errs", 0, []byte{}, kerr.CorruptMessage.Code},
	}
	for i, tc := range cases {
		rp := c.produceRaw(9, tc.topic, tc.part, 1, tc.batch, int32(i+1))
		if rp.ErrorCode != tc.code {
			t.Errorf("%s: error %d, want %d", tc.name, rp.ErrorCode, tc.code)
		}
		if tc.code != kerr.UnknownTopicOrPartition.Code && (rp.ErrorMessage == nil || *rp.ErrorMessage == "") {
			t.Errorf("%s: no error message", tc.name)
		}
	}
	if l.EndOffset() != 0 {
		t.Fatalf("rejected batches were appended: log end %d", l.EndOffset())
	}
}

// TestIdempotentProducer checks duplicates, gaps, epochs and sequence wrap
// with raw requests.
func TestIdempotentProducer(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("idem", 1, nil)
	l := tb.partitionLog("idem", 0)
	c := dial(t, tb.addr)
	ipr := c.initProducerID(4, -1, -1, 1)
	if ipr.ErrorCode != 0 || ipr.ProducerID < 0 || ipr.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId: %+v", ipr)
	}
	pid := ipr.ProducerID
	corr := int32(10)
	produce := func(epoch int16, seq int32, values ...string) *kmsg.ProduceResponseTopicPartition {
		corr++
		return c.produceRaw(9, "idem", 0, -1, makeBatch(t, idempotentBatch(pid, epoch, seq, values...)), corr)
	}
	expect := func(rp *kmsg.ProduceResponseTopicPartition, code int16, base int64, end int64) {
		t.Helper()
		if rp.ErrorCode != code || (code == 0 && rp.BaseOffset != base) {
			t.Fatalf("error %d base %d, want error %d base %d", rp.ErrorCode, rp.BaseOffset, code, base)
		}
		if l.EndOffset() != end {
			t.Fatalf("log end %d, want %d", l.EndOffset(), end)
		}
	}
	expect(produce(0, 0, "a", "b"), 0, 0, 2)
	expect(produce(0, 2, "c"), 0, 2, 3)
	// The same batch again: the original offsets, nothing appended.
	expect(produce(0, 2, "c"), 0, 2, 3)
	expect(produce(0, 0, "a", "b"), 0, 0, 3)
	// A gap.
	expect(produce(0, 5, "d"), kerr.OutOfOrderSequenceNumber.Code, 0, 3)
	// InitProducerId naming the ID and epoch (KIP-360) gets a fresh ID, as
	// Kafka answers every non-transactional producer: nothing proves the
	// caller owns pid, so its epoch is not bumped.
	fresh := c.initProducerID(4, pid, 0, 2)
	if fresh.ErrorCode != 0 || fresh.ProducerID == pid || fresh.ProducerID < 0 || fresh.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId naming producer %d: %+v, want a fresh ID at epoch 0", pid, fresh)
	}
	// A newer epoch of a known ID (a transactional producer's bump) must
	// start at sequence 0 and fences the old one.
	expect(produce(1, 3, "e"), kerr.OutOfOrderSequenceNumber.Code, 0, 3)
	expect(produce(1, 0, "e"), 0, 3, 4)
	expect(produce(0, 3, "f"), kerr.InvalidProducerEpoch.Code, 0, 4)
	// Sequences wrap at MaxInt32: a new epoch starting at 0 then a batch
	// ending at MaxInt32 is unreachable quickly, so an unknown producer
	// starting near the top (accepted, Kafka >= 2.5) is used instead.
	other := c.initProducerID(4, -1, -1, 3).ProducerID
	corr++
	rp := c.produceRaw(9, "idem", 0, -1, makeBatch(t, idempotentBatch(other, 0, 1<<31-2, "y", "z")), corr)
	expect(rp, 0, 4, 6)
	corr++
	rp = c.produceRaw(9, "idem", 0, -1, makeBatch(t, idempotentBatch(other, 0, 0, "wrapped")), corr)
	expect(rp, 0, 6, 7)

	// A transactional ID gets the coordinator's producer ID, its epoch
	// bumped by each InitProducerId; a timeout above
	// transaction.max.timeout.ms is refused.
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(4)
	req.TransactionalID = strp("txn")
	req.ProducerID, req.ProducerEpoch = -1, -1
	req.TransactionTimeoutMillis = int32(DefaultConfig().Txn.MaxTimeout.Milliseconds()) + 1
	if resp := c.roundTrip(req, 99).(*kmsg.InitProducerIDResponse); resp.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("transactional InitProducerId over the longest timeout: error %d", resp.ErrorCode)
	}
	req.TransactionTimeoutMillis = 60000
	first := c.roundTrip(req, 100).(*kmsg.InitProducerIDResponse)
	second := c.roundTrip(req, 101).(*kmsg.InitProducerIDResponse)
	if first.ErrorCode != 0 || second.ErrorCode != 0 || first.ProducerID != second.ProducerID || first.ProducerEpoch != 0 || second.ProducerEpoch != 1 {
		t.Fatalf("transactional InitProducerId: %+v then %+v", first, second)
	}
}

// TestProducerStateSurvivesRestart checks duplicate detection after a clean
// restart (snapshot) and an unclean one (snapshot deleted: rebuilt from the
// log).
func TestProducerStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	tb := startBroker(t, withDir(dir))
	tb.createTopic("state", 1, nil)
	c := dial(t, tb.addr)
	pid := c.initProducerID(4, -1, -1, 1).ProducerID
	batches := [][]byte{
		makeBatch(t, idempotentBatch(pid, 0, 0, "a", "b")),
		makeBatch(t, idempotentBatch(pid, 0, 2, "c")),
	}
	for i, b := range batches {
		if rp := c.produceRaw(9, "state", 0, -1, append([]byte(nil), b...), int32(2+i)); rp.ErrorCode != 0 {
			t.Fatalf("produce %d: error %d", i, rp.ErrorCode)
		}
	}
	tb.stop()
	snapshot := filepath.Join(dir, "data", "state-0", "producer-state.snapshot")
	if _, err := os.Stat(snapshot); err != nil {
		t.Fatalf("no snapshot after a clean stop: %v", err)
	}

	check := func(tb *testBroker) {
		t.Helper()
		c := dial(t, tb.addr)
		l := tb.partitionLog("state", 0)
		for i, want := range []int64{0, 2} {
			rp := c.produceRaw(9, "state", 0, -1, append([]byte(nil), batches[i]...), int32(10+i))
			if rp.ErrorCode != 0 || rp.BaseOffset != want {
				t.Fatalf("duplicate %d: error %d base %d, want base %d", i, rp.ErrorCode, rp.BaseOffset, want)
			}
		}
		if l.EndOffset() != 3 {
			t.Fatalf("duplicates appended: log end %d", l.EndOffset())
		}
		gap := makeBatch(t, idempotentBatch(pid, 0, 9, "gap"))
		if rp := c.produceRaw(9, "state", 0, -1, gap, 20); rp.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
			t.Fatalf("gap after restart: error %d", rp.ErrorCode)
		}
	}
	tb = startBroker(t, withDir(dir))
	check(tb)
	tb.stop()

	if err := os.Remove(snapshot); err != nil {
		t.Fatal(err)
	}
	tb = startBroker(t, withDir(dir))
	check(tb)
}

// TestProduceRandomPayloads sends random and mutated batches: the broker
// never panics, the connection stays usable, and the log only ever holds
// whole valid batches, accepted ones exactly.
func TestProduceRandomPayloads(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("fuzz", 1, nil)
	l := tb.partitionLog("fuzz", 0)
	c := dial(t, tb.addr)
	rng := rand.New(rand.NewSource(1))
	records := int64(0)
	for i := range 400 {
		var payload []byte
		spec := plainBatch("v1", "value two", "three")
		spec.codec = []int16{0, 1, 4}[rng.Intn(3)]
		good := makeBatch(t, spec)
		switch rng.Intn(5) {
		case 0:
			payload = make([]byte, rng.Intn(200))
			rng.Read(payload)
		case 1:
			payload = good[:rng.Intn(len(good))]
		case 2:
			payload = append([]byte(nil), good...)
			payload[rng.Intn(len(payload))] ^= byte(1 + rng.Intn(255))
		case 3:
			payload = append([]byte(nil), good...)
			payload[8+rng.Intn(53)] = byte(rng.Intn(256)) // header field
		default:
			payload = good
		}
		rp := c.produceRaw(9, "fuzz", 0, 1, payload, int32(i+1))
		if rp.ErrorCode == 0 {
			records += 3
		}
		if l.EndOffset() != records {
			t.Fatalf("payload %d: log end %d, accepted records %d", i, l.EndOffset(), records)
		}
	}
	if records == 0 {
		t.Fatal("no payload was accepted")
	}
	stored := readAll(t, l)
	next := int64(0)
	for _, h := range batchesIn(t, stored) {
		if h.BaseOffset != next {
			t.Fatalf("batch at %d, want %d", h.BaseOffset, next)
		}
		next = h.NextOffset()
	}
	if _, err := recordbatch.NewDecoder(1).Validate(stored, 1<<30, &recordbatch.Rules{MaxDecompressed: recordbatch.DefaultMaxDecompressedBytes}); err != nil {
		t.Fatalf("the log holds an invalid batch: %v", err)
	}
	c.apiVersionsOK(1000)
}
