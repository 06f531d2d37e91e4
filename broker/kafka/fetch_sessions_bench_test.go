package kafka

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// BenchmarkFetchSessions is a caught-up consumer of 1,000 partitions into
// which one batch of 10 records arrives per fetch, each time in another
// partition — the shape KIP-227 is for — fetching with and without a
// fetch session. It reports the broker's CPU per fetched record
// (broker-ns/record): the process's CPU time less the client's, which runs
// locked to its own thread, so encoding the requests, reading the answers
// and appending the records (straight to the logs) are not counted. The
// client makes almost no garbage, so the GC work is the broker's.
//
//	go test -run '^$' -bench BenchmarkFetchSessions -count 5 ./broker/kafka/
func BenchmarkFetchSessions(b *testing.B) {
	const partitions, recordsPerBatch = 1000, 10
	for _, sessions := range []bool{false, true} {
		b.Run("sessions="+strconv.FormatBool(sessions), func(b *testing.B) {
			tb := startBroker(b)
			const topic = "wide"
			tb.createTopic(topic, partitions, nil)
			offsets := make([]int64, partitions)
			values := make([]string, recordsPerBatch)
			for i := range values {
				values[i] = string(make([]byte, 100))
			}
			batch := makeBatch(b, plainBatch(values...))

			nc, err := net.Dial("tcp", tb.addr)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()

			// The client's work is measured on its own thread, and kept
			// small: requests are updated in place and encoded into one
			// buffer, answers read into another and not decoded — the
			// client knows where the records are, and the broker's count of
			// record bytes sent checks that they came.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
			var out, in []byte
			roundTrip := func(req *kmsg.FetchRequest, corr int32) []byte {
				out = formatter.AppendRequest(out[:0], req, corr)
				if _, err := nc.Write(out); err != nil {
					b.Fatal(err)
				}
				var size [4]byte
				if _, err := io.ReadFull(nc, size[:]); err != nil {
					b.Fatal(err)
				}
				n := int(binary.BigEndian.Uint32(size[:]))
				if cap(in) < n {
					in = make([]byte, n)
				}
				in = in[:n]
				if _, err := io.ReadFull(nc, in); err != nil {
					b.Fatal(err)
				}
				return in
			}
			newRequest := func() *kmsg.FetchRequest {
				req := kmsg.NewPtrFetchRequest()
				req.SetVersion(12)
				req.ReplicaID, req.MaxBytes, req.MinBytes = -1, 50<<20, 1
				rt := kmsg.NewFetchRequestTopic()
				rt.Topic = topic
				req.Topics = append(req.Topics, rt)
				return req
			}
			full := newRequest() // every partition: the request without a session, and the one opening it
			for p := range int32(partitions) {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes = p, 1<<20
				full.Topics[0].Partitions = append(full.Topics[0].Partitions, rp)
			}
			full.SessionEpoch = -1
			incremental := newRequest() // the partition fetched last, at its new offset
			incremental.Topics[0].Partitions = append(incremental.Topics[0].Partitions, kmsg.NewFetchRequestTopicPartition())
			incremental.Topics[0].Partitions[0].PartitionMaxBytes = 1 << 20
			if sessions {
				full.SessionEpoch = 0
				resp := kmsg.NewPtrFetchResponse()
				resp.SetVersion(full.Version)
				frame := roundTrip(full, 0)
				// Correlation ID, then a flexible header's empty tags.
				if err := resp.ReadFrom(frame[5:]); err != nil || resp.ErrorCode != 0 || resp.SessionID == 0 {
					b.Fatalf("opening the session: %v, error %d, session %d", err, resp.ErrorCode, resp.SessionID)
				}
				incremental.SessionID, incremental.SessionEpoch = resp.SessionID, 0
			}
			batchBytes := int64(len(batch))
			sent := tb.broker.metrics.streamedRecordBytes.Load()

			processStart, clientStart := cpuTime(b, unix.CLOCK_PROCESS_CPUTIME_ID), cpuTime(b, unix.CLOCK_THREAD_CPUTIME_ID)
			b.ResetTimer()
			last := int32(-1)
			for i := range b.N {
				p := int32(i*7) % partitions
				if _, err := tb.partitionLog(topic, p).Append(append([]byte(nil), batch...), 0); err != nil {
					b.Fatal(err)
				}
				req := full
				if sessions {
					// The partition fetched last moved on; a session
					// holds the others where they were.
					req = incremental
					req.SessionEpoch++
					req.Topics = req.Topics[:0]
					if last >= 0 {
						req.Topics = req.Topics[:1]
						req.Topics[0].Partitions[0].Partition, req.Topics[0].Partitions[0].FetchOffset = last, offsets[last]
					}
				}
				roundTrip(req, int32(i+1))
				offsets[p] += recordsPerBatch
				full.Topics[0].Partitions[p].FetchOffset = offsets[p]
				last = p
			}
			b.StopTimer()
			process, client := cpuTime(b, unix.CLOCK_PROCESS_CPUTIME_ID)-processStart, cpuTime(b, unix.CLOCK_THREAD_CPUTIME_ID)-clientStart
			if got := tb.broker.metrics.streamedRecordBytes.Load() - sent; got != int64(b.N)*batchBytes {
				b.Fatalf("the broker sent %d record bytes, want %d batches of %d", got, b.N, batchBytes)
			}
			fetched := b.N * recordsPerBatch
			b.ReportMetric(float64(process-client)/float64(fetched), "broker-ns/record")
			b.ReportMetric(float64(client)/float64(fetched), "client-ns/record")
		})
	}
}

// cpuTime reads a CPU-time clock in nanoseconds.
func cpuTime(b *testing.B, clock int32) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		b.Fatal(fmt.Errorf("clock_gettime: %w", err))
	}
	return ts.Nano()
}
