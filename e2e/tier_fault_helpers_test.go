package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/coord/zk"
	"millrace/broker/tier"
	"millrace/internal/waitfor"
)

// The fault tests' tools: a tiered cluster on versitygw reached through a
// proxy the test watches and holds, the partition's remote state read from
// ZooKeeper, its objects listed and read from the store, and a paced
// producer that times each acknowledgement.

// tierBucket and tierPrefix: the brokers' millrace.remote.storage.url is
// s3://tierBucket/tierPrefix.
const (
	tierBucket = "tier"
	tierPrefix = "segments"
)

// storeProxy is an HTTP proxy in front of versitygw. It counts the
// requests the brokers send the store and can hold the next PUT of an
// object whose name ends in a suffix: the broker then waits for the store
// mid-upload, as on a slow store, for as long as the test wants.
type storeProxy struct {
	addr  string
	proxy *httputil.ReverseProxy

	mu       sync.Mutex // guards the following
	requests int
	inflight map[int]time.Time // requests forwarded and not answered, by number: when each was sent
	arm      string            // hold the next PUT whose path ends in arm; "" for none
	held     chan string       // receives the held PUT's object name
	release  chan struct{}     // closed to let the held PUT go
}

// startStoreProxy serves a proxy of the S3 server at target on a free
// loopback port until the test ends.
func startStoreProxy(t *testing.T, target string) *storeProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The Host header is left as the brokers sent it: it is part of their
	// requests' signatures, which versitygw checks against it.
	p := &storeProxy{addr: l.Addr().String(), inflight: map[int]time.Time{}, proxy: httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})}
	// A request the test dropped or the stopped store never answered is
	// the test's doing, not news: answered 502 without a log line.
	p.proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	srv := &http.Server{Handler: p}
	go srv.Serve(l)
	t.Cleanup(func() {
		p.releaseHeld()
		srv.Close()
	})
	return p
}

// ServeHTTP counts the request, holds it if it is the armed PUT, and
// forwards it unless its broker is gone by then.
func (p *storeProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests++
	id := p.requests
	hold := r.Method == http.MethodPut && p.arm != "" && strings.HasSuffix(r.URL.Path, p.arm)
	var held chan string
	var release chan struct{}
	if hold {
		p.arm, held, release = "", p.held, p.release
	}
	p.mu.Unlock()
	if hold {
		// The body is read first, so that the broker's connection is
		// watched for its close (and the request's context cancelled).
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		held <- strings.TrimPrefix(r.URL.Path, "/"+tierBucket+"/"+tierPrefix+"/")
		<-release
		if r.Context().Err() != nil {
			return // its broker is gone: the store never sees it
		}
	}
	p.mu.Lock()
	p.inflight[id] = time.Now()
	p.mu.Unlock()
	p.proxy.ServeHTTP(w, r)
	p.mu.Lock()
	delete(p.inflight, id)
	p.mu.Unlock()
}

// waiting is how long the oldest request the store has not answered has
// waited; 0 for none.
func (p *storeProxy) waiting() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var longest time.Duration
	for _, at := range p.inflight {
		longest = max(longest, time.Since(at))
	}
	return longest
}

// holdNextPut arms the proxy: the next PUT of an object whose name ends in
// suffix is held until releaseHeld, and its object name is sent on the
// returned channel when it arrives.
func (p *storeProxy) holdNextPut(suffix string) <-chan string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.arm, p.held, p.release = suffix, make(chan string, 1), make(chan struct{})
	return p.held
}

// releaseHeld lets a held PUT go on (or be dropped, if its broker is gone).
func (p *storeProxy) releaseHeld() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.arm = ""
	if p.release != nil {
		close(p.release)
		p.release = nil
	}
}

// count is how many requests the proxy has received.
func (p *storeProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

// tieredS3Cluster is a cluster whose brokers keep tiered segments in
// versitygw's bucket through a storeProxy.
type tieredS3Cluster struct {
	*localCluster
	s3    *s3Server
	proxy *storeProxy
	store *minio.Client
	coord *zk.Store
}

// startTieredS3Cluster starts versitygw, its proxy and n brokers (one
// ZooKeeper node, /metrics on each) with tiered storage in its bucket and
// extra broker settings.
func startTieredS3Cluster(t *testing.T, n int, settings ...string) *tieredS3Cluster {
	t.Helper()
	s3 := startVersitygw(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := s3.newBucket(t, ctx, tierBucket)
	proxy := startStoreProxy(t, s3.addr)
	settings = append([]string{
		"remote.log.storage.system.enable=true",
		"millrace.remote.storage.url=s3://" + tierBucket + "/" + tierPrefix,
		"millrace.remote.storage.s3.endpoint=http://" + proxy.addr,
		"log.retention.check.interval.ms=200",
	}, settings...)
	env := []string{"AWS_ACCESS_KEY_ID=" + s3AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3SecretKey}
	c := startLocalClusterEnv(t, n, 1, env, []string{"--metrics"}, settings...)
	cs, err := zk.Connect(c.zk, 10*time.Second, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return &tieredS3Cluster{localCluster: c, s3: s3, proxy: proxy, store: store, coord: cs}
}

// createTiered creates a one-partition tiered topic of replication factor
// rf with local.retention.bytes=1 (every uploaded segment goes from local
// disk) and the extra configs, and waits until every broker knows its
// leader.
func (c *tieredS3Cluster) createTiered(topic string, rf int16, extra map[string]string) {
	c.t.Helper()
	configs := map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.bytes": kadm.StringPtr("1"),
	}
	for name, value := range extra {
		configs[name] = kadm.StringPtr(value)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.admin().CreateTopic(ctx, 1, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.t.Fatalf("create topic %s: %v", topic, err)
	}
	adm := c.admin()
	waitfor.Until(c.t, 20*time.Second, "the new topic fully replicated", func() bool { return c.fullyReplicated(adm, topic) })
	waitfor.Until(c.t, 20*time.Second, "every broker to know the new topic", func() bool {
		for _, node := range c.nodes {
			if !knowsTopic(node, topic, 1) {
				return false
			}
		}
		return true
	})
}

// leader is the partition's leader as Metadata reports it.
func (c *tieredS3Cluster) leader(topic string) int32 {
	c.t.Helper()
	parts, err := c.partitions(c.admin(), topic)
	if err != nil || len(parts) != 1 {
		c.t.Fatalf("metadata of %s: %v", topic, err)
	}
	return parts[0].Leader
}

// metricsURL is broker id's /metrics.
func (c *tieredS3Cluster) metricsURL(id int32) string {
	return "http://" + c.state[fmt.Sprintf("BROKER_METRICS_%d", id)] + "/metrics"
}

// remoteState reads partition 0's remote state from ZooKeeper.
func (c *tieredS3Cluster) remoteState(topic string) tier.State {
	c.t.Helper()
	st, _, _, err := tier.ReadState(c.coord, topic, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	return st
}

// objects lists the store's objects of the remote segments by name
// (without the URL's prefix), with their sizes.
func (c *tieredS3Cluster) objects() map[string]int64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := map[string]int64{}
	for o := range c.store.ListObjects(ctx, tierBucket, minio.ListObjectsOptions{Prefix: tierPrefix + "/", Recursive: true}) {
		if o.Err != nil {
			c.t.Fatalf("listing the bucket: %v", o.Err)
		}
		out[strings.TrimPrefix(o.Key, tierPrefix+"/")] = o.Size
	}
	return out
}

// object reads one object of the remote segments.
func (c *tieredS3Cluster) object(name string) []byte {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o, err := c.store.GetObject(ctx, tierBucket, tierPrefix+"/"+name, minio.GetObjectOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		c.t.Fatalf("reading %s: %v", name, err)
	}
	return b
}

// earliestLocal asks the partition's leader for its local log start
// (ListOffsets timestamp -4, KIP-1005's earliest-local).
func (c *tieredS3Cluster) earliestLocal(topic string) int64 {
	c.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -4
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.client())
	if err != nil {
		c.t.Fatalf("ListOffsets earliest-local of %s: %v", topic, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		c.t.Fatalf("ListOffsets earliest-local of %s: %d topics in the answer", topic, len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		c.t.Fatalf("ListOffsets earliest-local of %s: %v", topic, err)
	}
	return p.Offset
}

// segmentRecords decodes a remote .log object (record batches as broker/log
// writes them) into its records.
func segmentRecords(t *testing.T, name string, b []byte) []*kgo.Record {
	t.Helper()
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = b
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: 0}, &rp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		t.Fatalf("decoding %s: %v", name, fp.Err)
	}
	return fp.Records
}

// pacedProducer writes records "<n> <padding>", n counting up, one at a
// time with an idempotent acks=all producer, one every period, and keeps
// every acknowledgement and how long each took.
type pacedProducer struct {
	acks *ackLog
	stop chan struct{}
	done chan struct{}

	mu        sync.Mutex // guards the following
	latencies []timedLatency
}

// timedLatency is one produce: when it was acknowledged and how long it took.
type timedLatency struct {
	at   time.Time
	took time.Duration
}

// producePaced starts a pacedProducer on topic.
func producePaced(t *testing.T, c *localCluster, topic string, period time.Duration) *pacedProducer {
	cl := c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordDeliveryTimeout(60*time.Second))
	p := &pacedProducer{acks: &ackLog{acked: map[int32][]ackedRecord{}}, stop: make(chan struct{}), done: make(chan struct{})}
	padding := strings.Repeat("p", 100)
	go func() {
		defer close(p.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for n := int64(0); ; n++ {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			start := time.Now()
			r, err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d %s", n, padding)}).First()
			cancel()
			p.acks.mu.Lock()
			if err != nil {
				p.acks.failed++
			} else {
				p.acks.acked[r.Partition] = append(p.acks.acked[r.Partition], ackedRecord{r.Offset, n})
			}
			p.acks.mu.Unlock()
			if err == nil {
				p.mu.Lock()
				p.latencies = append(p.latencies, timedLatency{time.Now(), time.Since(start)})
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// finish stops the producer and waits for its last produce.
func (p *pacedProducer) finish() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// lastAcked is the offset of the last acknowledged record, -1 for none.
func (p *pacedProducer) lastAcked() int64 {
	p.acks.mu.Lock()
	defer p.acks.mu.Unlock()
	recs := p.acks.acked[0]
	if len(recs) == 0 {
		return -1
	}
	return recs[len(recs)-1].offset
}

// within returns the latencies of the produces acknowledged in [from, to),
// sorted.
func (p *pacedProducer) within(from, to time.Time) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []time.Duration
	for _, l := range p.latencies {
		if !l.at.Before(from) && l.at.Before(to) {
			out = append(out, l.took)
		}
	}
	slices.Sort(out)
	return out
}

// recordValue parses a pacedProducer's record value into its number.
func recordValue(t *testing.T, r *kgo.Record) int64 {
	t.Helper()
	n, _, _ := strings.Cut(string(r.Value), " ")
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		t.Fatalf("offset %d: value %q is not a paced producer's", r.Offset, r.Value)
	}
	return v
}
