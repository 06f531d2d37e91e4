package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/coord/embedded"
	"millrace/broker/group"
	"millrace/broker/log"
	"millrace/broker/quota"
)

// startBenchBroker runs an in-process broker for a benchmark and returns its
// address; everything is closed by b.Cleanup. configure, when given,
// adjusts the broker's config.
func startBenchBroker(b *testing.B, configure ...func(*Config)) (string, *cluster.Cluster) {
	b.Helper()
	dir := b.TempDir()
	logger := slog.New(slog.DiscardHandler)
	server, err := embedded.Open(dir+"/coord", logger)
	if err != nil {
		b.Fatal(err)
	}
	store, err := server.Session()
	if err != nil {
		b.Fatal(err)
	}
	logs, err := log.OpenManager(dir+"/data", log.DefaultConfig(), logger)
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Listener = "127.0.0.1:0"
	for _, f := range configure {
		f(&cfg)
	}
	cl, err := cluster.Open(cluster.Config{BrokerID: 0, DefaultPartitions: 1, DefaultReplicationFactor: 1}, store, logs, log.DefaultConfig(), logger)
	if err != nil {
		b.Fatal(err)
	}
	gcfg := group.DefaultConfig()
	groups := group.New(store, gcfg, logger)
	broker, err := New(cfg, Deps{Cluster: cl, Groups: groups, Logs: logs, Store: store}, logger)
	if err != nil {
		b.Fatal(err)
	}
	if err := broker.Listen(); err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- broker.Serve(context.Background()) }()
	b.Cleanup(func() {
		broker.Close()
		<-served
		groups.Close()
		cl.Close()
		logs.Close()
		store.Close()
		server.Close()
	})
	return broker.Addr().String(), cl
}

// BenchmarkProduceFetch produces b.N 100-byte records through franz-go
// (idempotent, acks=all) and consumes them all back.
func BenchmarkProduceFetch(b *testing.B) {
	for _, partitions := range []int32{1, 6} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			addr, cl := startBenchBroker(b)
			topic := "bench"
			if _, err := cl.CreateTopic(cluster.TopicSpec{Name: topic, Partitions: partitions, ReplicationFactor: 1}, false); err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			prod := newClient(b, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			cons := newClient(b, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			value := make([]byte, 100)
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for i := range b.N {
				prod.Produce(ctx, &kgo.Record{Value: value, Partition: int32(i) % partitions}, func(_ *kgo.Record, err error) {
					if err != nil {
						b.Error(err)
					}
				})
			}
			if err := prod.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			for got := 0; got < b.N; {
				fs := cons.PollFetches(ctx)
				if err := fs.Err(); err != nil {
					b.Fatal(err)
				}
				got += fs.NumRecords()
			}
		})
	}
}

// BenchmarkProducePipelined sends b.N Produce requests, one batch of
// 100-byte records each, over one connection with up to 16 in flight (as a
// client pipelines them), and checks every acknowledgement: no error, base
// offsets dense and in order. It is the broker's whole request path
// (framing, parsing, validation, idempotence checks, append, response)
// in-process, with a client that only copies prepared bytes, so that a
// -cpuprofile shows the broker's cost per request.
func BenchmarkProducePipelined(b *testing.B) {
	for _, bc := range []struct {
		name       string
		records    int
		idempotent bool
		// quotas is the broker's Limiter: nil for none.
		quotas func() quota.Limiter
	}{
		// A producer at a steady rate sends small batches: the cost per
		// request, not per byte.
		{"batch=1KiB", 9, false, nil},
		// A Limiter that records every request and throttles none: the
		// cost of the enforcer alone.
		{"batch=1KiB/quotas", 9, false, func() quota.Limiter { return new(countingLimiter) }},
		// The broker's own Manager holding quotas no request reaches: each
		// Produce is resolved to its entity and taken from its token bucket.
		{"batch=1KiB/quota-manager", 9, false, unreachedQuotas},
		{"batch=16KiB", 150, false, nil},
		{"batch=1MiB", 9000, false, nil},
		{"batch=1MiB/idempotent", 9000, true, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var configure []func(*Config)
			var limiter quota.Limiter
			if bc.quotas != nil {
				limiter = bc.quotas()
				configure = append(configure, func(c *Config) { c.Quotas = limiter })
			}
			addr, cl := startBenchBroker(b, configure...)
			if _, err := cl.CreateTopic(cluster.TopicSpec{Name: "bench", Partitions: 1, ReplicationFactor: 1}, false); err != nil {
				b.Fatal(err)
			}
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			c := &rawClient{t: b, nc: nc}
			spec := plainBatch(make([]string, bc.records)...)
			for i := range spec.values {
				spec.values[i] = strings.Repeat("v", 100)
			}
			acks := int16(1)
			if bc.idempotent {
				resp := c.initProducerID(4, -1, -1, 1)
				if resp.ErrorCode != 0 {
					b.Fatalf("InitProducerId: error %d", resp.ErrorCode)
				}
				spec.producer, spec.epoch, spec.sequence = resp.ProducerID, resp.ProducerEpoch, 0
				acks = -1
			}
			batch := makeBatch(b, spec)
			req := kmsg.NewPtrProduceRequest()
			req.SetVersion(9)
			req.Acks, req.TimeoutMillis = acks, 30000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "bench"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = batch
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			msg := frame(req, 0)
			at := bytes.Index(msg, batch[:batchHeaderBytes])
			if at < 0 {
				b.Fatal("batch not found in the request frame")
			}
			inBatch := msg[at : at+len(batch)]
			castagnoli := crc32.MakeTable(crc32.Castagnoli)

			const inFlight = 16
			tokens := make(chan struct{}, inFlight)
			written := make(chan error, 1)
			b.SetBytes(int64(len(batch)))
			b.ResetTimer()
			go func() {
				for i := 0; i < b.N; i++ {
					tokens <- struct{}{}
					binary.BigEndian.PutUint32(msg[8:], uint32(i))
					if bc.idempotent {
						binary.BigEndian.PutUint32(inBatch[53:], uint32(i*bc.records))
						binary.BigEndian.PutUint32(inBatch[17:], crc32.Checksum(inBatch[21:], castagnoli))
					}
					if _, err := nc.Write(msg); err != nil {
						written <- err
						return
					}
				}
				written <- nil
			}()
			for i := 0; i < b.N; i++ {
				resp := c.readResponse(req, int32(i)).(*kmsg.ProduceResponse)
				<-tokens
				p := resp.Topics[0].Partitions[0]
				if p.ErrorCode != 0 || p.BaseOffset != int64(i*bc.records) {
					b.Fatalf("request %d: error %d, base offset %d, want %d", i, p.ErrorCode, p.BaseOffset, i*bc.records)
				}
			}
			b.StopTimer()
			if err := <-written; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N*bc.records)/b.Elapsed().Seconds(), "records/s")
			if m, ok := limiter.(*quota.Manager); ok && m.Sensors() == 0 {
				b.Fatal("the quota Manager measured no request: the benchmark did not go through it")
			}
		})
	}
}

// unreachedQuotas is a quota Manager as a broker process wires one,
// holding a producer_byte_rate on the benchmark client's ID and on the
// default user, both far above what one connection can send (1 TB/s),
// so every Produce goes through entity resolution, the token bucket and
// the usage rate and none is throttled.
func unreachedQuotas() quota.Limiter {
	m := quota.NewManager(0)
	m.Set(quota.ClientEntity("test-client"), map[quota.Kind]float64{quota.ProducerByteRate: 1e12})
	m.Set(quota.UserEntity(quota.Default), map[quota.Kind]float64{quota.ProducerByteRate: 1e12})
	return m
}

// countingLimiter counts what it is asked and throttles nothing, as a
// quota Manager with every client under its quotas.
type countingLimiter struct{ recorded atomic.Int64 }

func (l *countingLimiter) Record(quota.Kind, string, string, float64, time.Time) time.Duration {
	l.recorded.Add(1)
	return 0
}

func (l *countingLimiter) TryMutate(string, string, int, time.Time) (time.Duration, bool) {
	return 0, true
}
