package kafka

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/quota"
)

// fakeLimiter throttles one client ID by a fixed rule: every Record of
// kind for it returns throttle; its controller mutations are allowed up to
// mutations partitions, beyond which TryMutate refuses and Record
// (the permissive quota) throttles. It keeps every call, with the broker's
// timestamps.
type fakeLimiter struct {
	client    string
	kind      quota.Kind
	throttle  time.Duration
	mutations int

	mu    sync.Mutex // guards the following
	calls []fakeCall
	used  int
}

type fakeCall struct {
	kind     quota.Kind
	clientID string
	value    float64
	now      time.Time
}

func (f *fakeLimiter) Record(kind quota.Kind, user, clientID string, value float64, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fakeCall{kind, clientID, value, now})
	if clientID != f.client {
		return 0
	}
	if kind == quota.ControllerMutationRate {
		f.used += int(value)
		if f.used > f.mutations {
			return f.throttle
		}
		return 0
	}
	if kind == f.kind {
		return f.throttle
	}
	return 0
}

func (f *fakeLimiter) TryMutate(user, clientID string, n int, now time.Time) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fakeCall{quota.ControllerMutationRate, clientID, float64(n), now})
	if clientID != f.client || f.used+n <= f.mutations {
		f.used += n
		return 0, true
	}
	return f.throttle, false
}

// recorded returns the calls of kind, in order.
func (f *fakeLimiter) recorded(kind quota.Kind) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeCall
	for _, c := range f.calls {
		if c.kind == kind {
			out = append(out, c)
		}
	}
	return out
}

// sendAs sends req on c with clientID in its header.
func (c *rawClient) sendAs(clientID string, req kmsg.Request, correlationID int32) {
	c.t.Helper()
	c.send(kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, correlationID))
}

func apiVersions() *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "millrace-test", "1"
	return req
}

func produceOne(t *testing.T, topic string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = makeBatch(t, plainBatch("a"))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// TestQuotaThrottleMutesConnection: a produce over its quota is answered
// at once with throttle_time_ms, and its connection's next request is read
// only once the throttle has passed (KIP-219), by the broker's own
// timestamps; a response in flight is still written during the mute, and
// another client's connection is served meanwhile.
func TestQuotaThrottleMutesConnection(t *testing.T) {
	t.Parallel()
	const throttle = 1500 * time.Millisecond
	limiter := &fakeLimiter{client: "noisy", kind: quota.ProducerByteRate, throttle: throttle}
	reg := prometheus.NewPedanticRegistry()
	tb := startBroker(t, withConfig(func(c *Config) { c.Quotas = limiter }), withMetrics(reg))
	tb.createTopic("logs", 1, nil)
	tb.createTopic("idle", 1, nil)

	noisy, quiet := dial(t, tb.addr), dial(t, tb.addr)
	// A long-poll fetch in flight on the noisy connection, answered
	// during the mute.
	fetch := fetchRequest(11, 300*time.Millisecond, 1, 1<<20, fetchPart{topic: "idle", maxBytes: 1 << 20})
	noisy.sendAs("noisy", fetch, 1)
	produce := produceOne(t, "logs")
	start := time.Now()
	noisy.sendAs("noisy", produce, 2)
	noisy.readResponse(fetch, 1)
	fetched := time.Since(start)
	presp := noisy.readResponse(produce, 2).(*kmsg.ProduceResponse)
	if presp.ThrottleMillis < int32(throttle/time.Millisecond) {
		t.Fatalf("throttle_time_ms %d, want at least %v", presp.ThrottleMillis, throttle)
	}
	if code := presp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("throttled produce failed with error %d: a throttle is not an error", code)
	}
	// Another client during the mute is answered at once.
	quietReq := apiVersions()
	quiet.sendAs("quiet", quietReq, 1)
	quiet.readResponse(quietReq, 1)
	quietDone := time.Since(start)

	next := apiVersions()
	noisy.sendAs("noisy", next, 3)
	noisy.readResponse(next, 3)
	if elapsed := time.Since(start); elapsed < throttle {
		t.Errorf("the muted connection's next request was answered %v after the produce, before the %v throttle", elapsed, throttle)
	}
	if fetched >= throttle {
		t.Errorf("the fetch in flight was answered after %v: not during the %v mute", fetched, throttle)
	}
	if quietDone >= throttle {
		t.Errorf("another connection's request waited %v: the mute must hold only the throttled connection", quietDone)
	}

	// By the broker's timestamps: the produce was recorded at p, and the
	// next request (handled at n, after it was read) not before p+throttle.
	produced := limiter.recorded(quota.ProducerByteRate)
	var after []fakeCall
	for _, c := range limiter.recorded(quota.RequestPercentage) {
		if c.clientID == "noisy" && c.now.After(produced[0].now) {
			after = append(after, c)
		}
	}
	if len(produced) != 1 || len(after) == 0 {
		t.Fatalf("recorded %d produces and %d later requests, want 1 and the ApiVersions", len(produced), len(after))
	}
	if got := after[len(after)-1].now.Sub(produced[0].now); got < throttle {
		t.Errorf("the next request was handled %v after the throttled produce, within the %v mute", got, throttle)
	}
	if produced[0].value <= float64(len(produce.Topics[0].Partitions[0].Records)) {
		t.Errorf("recorded %v produce bytes, want the whole request (more than its batch)", produced[0].value)
	}
	if n := testutil.ToFloat64(tb.broker.quotas.throttled.WithLabelValues(string(quota.ProducerByteRate))); n != 1 {
		t.Errorf("throttled produce requests counted: %v, want 1", n)
	}
}

// TestQuotaReplicaFetchExempt: a follower's fetch (replica ID >= 0) is
// outside client quotas, while a consumer's fetch by the same client ID
// records its record bytes and is throttled.
func TestQuotaReplicaFetchExempt(t *testing.T) {
	t.Parallel()
	limiter := &fakeLimiter{client: "noisy", kind: quota.ConsumerByteRate, throttle: 50 * time.Millisecond}
	tb := startBroker(t, withConfig(func(c *Config) { c.Quotas = limiter }))
	tb.createTopic("logs", 1, nil)
	c := dial(t, tb.addr)
	produce := produceOne(t, "logs")
	c.sendAs("noisy", produce, 1)
	c.readResponse(produce, 1)

	follower := dial(t, tb.addr)
	freq := fetchRequest(11, 0, 0, 1<<20, fetchPart{topic: "logs", maxBytes: 1 << 20})
	freq.ReplicaID = 1
	follower.sendAs("noisy", freq, 1)
	if resp := follower.readResponse(freq, 1).(*kmsg.FetchResponse); resp.ThrottleMillis != 0 {
		t.Errorf("follower fetch throttled %d ms: replication is exempt", resp.ThrottleMillis)
	}
	if n := len(limiter.recorded(quota.ConsumerByteRate)); n != 0 {
		t.Fatalf("follower fetch recorded %d times under consumer_byte_rate, want none", n)
	}

	consumer := dial(t, tb.addr)
	creq := fetchRequest(11, 0, 0, 1<<20, fetchPart{topic: "logs", maxBytes: 1 << 20})
	consumer.sendAs("noisy", creq, 1)
	resp := consumer.readResponse(creq, 1).(*kmsg.FetchResponse)
	if resp.ThrottleMillis <= 0 {
		t.Errorf("consumer fetch over its quota: throttle_time_ms %d, want > 0", resp.ThrottleMillis)
	}
	got := limiter.recorded(quota.ConsumerByteRate)
	if len(got) != 1 || got[0].value != float64(len(resp.Topics[0].Partitions[0].RecordBatches)) {
		t.Errorf("consumer_byte_rate records %+v, want one of the %d record bytes sent", got, len(resp.Topics[0].Partitions[0].RecordBatches))
	}
}

// TestQuotaExemptions: which connections are outside client quotas.
func TestQuotaExemptions(t *testing.T) {
	t.Parallel()
	consumerFetch, followerFetch := fetchRequest(11, 0, 0, 1), fetchRequest(11, 0, 0, 1)
	followerFetch.ReplicaID = 2
	for _, tc := range []struct {
		name      string
		listeners int
		conn      *conn
		body      kmsg.Request
		exempt    bool
	}{
		{"client on the only listener", 1, &conn{listener: "PLAINTEXT", principal: anonymous}, consumerFetch, false},
		{"inter-broker listener of its own", 2, &conn{listener: "PLAINTEXT", principal: anonymous}, consumerFetch, true},
		{"client listener beside it", 2, &conn{listener: "CLIENTS", principal: anonymous}, consumerFetch, false},
		{"inter-broker SASL user", 1, &conn{listener: "PLAINTEXT", principal: "User:broker"}, consumerFetch, true},
		{"follower fetch", 1, &conn{listener: "PLAINTEXT", principal: anonymous}, followerFetch, true},
		{"the broker's own request", 1, nil, consumerFetch, true},
	} {
		cfg := DefaultConfig()
		cfg.Quotas = &fakeLimiter{}
		cfg.SASL.InterBrokerUsername = "broker"
		e, err := newQuotaEnforcer(cfg, tc.listeners, "PLAINTEXT", nil)
		if err != nil {
			t.Fatal(err)
		}
		r := &request{key: fetchKey, body: tc.body, conn: tc.conn}
		if got := e.exempt(r); got != tc.exempt {
			t.Errorf("%s: exempt %v, want %v", tc.name, got, tc.exempt)
		}
	}
	for _, q := range []quota.Limiter{nil, quota.None{}} {
		cfg := DefaultConfig()
		cfg.Quotas = q
		if e, _ := newQuotaEnforcer(cfg, 1, "PLAINTEXT", nil); e != nil {
			t.Errorf("Quotas %T: an enforcer, want none (no cost without quotas)", q)
		}
	}
}

// TestQuotaControllerMutations: KIP-599. Versions that know
// THROTTLING_QUOTA_EXCEEDED (CreateTopics v6+, CreatePartitions v3+,
// DeleteTopics v5+) get it for the topics over the rate, which are left
// unchanged; older versions go ahead and are throttled.
func TestQuotaControllerMutations(t *testing.T) {
	t.Parallel()
	const throttle = 40 * time.Millisecond
	createTopics := func(version int16, names ...string) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(version)
		for _, n := range names {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 2, 1
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	for _, tc := range []struct {
		name    string
		request func() kmsg.Request
		// codes are the topics' error codes, created whether the
		// topics exist afterwards.
		codes   []int16
		created []bool
	}{
		{"CreateTopics v6 strict", func() kmsg.Request { return createTopics(6, "a", "b") },
			[]int16{0, kerr.ThrottlingQuotaExceeded.Code}, []bool{true, false}},
		{"CreateTopics v5 permissive", func() kmsg.Request { return createTopics(5, "a", "b") },
			[]int16{0, 0}, []bool{true, true}},
		{"CreatePartitions v3 strict", func() kmsg.Request {
			req := kmsg.NewPtrCreatePartitionsRequest()
			req.SetVersion(3)
			for _, n := range []string{"x", "y"} {
				rt := kmsg.NewCreatePartitionsRequestTopic()
				rt.Topic, rt.Count = n, 4
				req.Topics = append(req.Topics, rt)
			}
			return req
		}, []int16{0, kerr.ThrottlingQuotaExceeded.Code}, nil},
		{"DeleteTopics v5 strict", func() kmsg.Request {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.SetVersion(5)
			req.TopicNames = []string{"x", "y"}
			return req
		}, []int16{0, kerr.ThrottlingQuotaExceeded.Code}, nil},
		{"DeleteTopics v4 permissive", func() kmsg.Request {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.SetVersion(4)
			req.TopicNames = []string{"x", "y"}
			return req
		}, []int16{0, 0}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Two partitions allowed: the first topic's.
			limiter := &fakeLimiter{client: "admin", throttle: throttle, mutations: 2}
			tb := startBroker(t, withConfig(func(c *Config) { c.Quotas = limiter }))
			tb.createTopic("x", 2, nil)
			tb.createTopic("y", 2, nil)
			c := dial(t, tb.addr)
			req := tc.request()
			c.sendAs("admin", req, 1)
			resp := c.readResponse(req, 1)
			ms, _ := resp.(kmsg.ThrottleResponse).Throttle()
			if ms < int32(throttle/time.Millisecond) {
				t.Errorf("throttle_time_ms %d, want at least %v", ms, throttle)
			}
			var codes []int16
			switch resp := resp.(type) {
			case *kmsg.CreateTopicsResponse:
				for _, st := range resp.Topics {
					codes = append(codes, st.ErrorCode)
				}
			case *kmsg.CreatePartitionsResponse:
				for _, st := range resp.Topics {
					codes = append(codes, st.ErrorCode)
				}
			case *kmsg.DeleteTopicsResponse:
				for _, st := range resp.Topics {
					codes = append(codes, st.ErrorCode)
				}
			}
			if len(codes) != len(tc.codes) {
				t.Fatalf("error codes %v, want %v", codes, tc.codes)
			}
			for i := range codes {
				if codes[i] != tc.codes[i] {
					t.Errorf("error codes %v, want %v", codes, tc.codes)
				}
			}
			for i, want := range tc.created {
				name := []string{"a", "b"}[i]
				if _, ok := tb.cluster.Topic(name); ok != want {
					t.Errorf("topic %s exists: %v, want %v", name, ok, want)
				}
			}
		})
	}
}

// switchedLimiter is a fakeLimiter whose Switch says only the kinds in on
// are limited anywhere.
type switchedLimiter struct {
	*fakeLimiter
	on map[quota.Kind]bool
}

func (s switchedLimiter) Enabled(kind quota.Kind) bool { return s.on[kind] }

// TestQuotaKindsNobodyLimitsAreNotMeasured: with a Limiter that says which
// kinds any entity limits (quota.Switch), a request is recorded only under
// those: with none on, a produce and a fetch ask the Limiter nothing; with
// producer_byte_rate on, the produce is recorded and throttled.
func TestQuotaKindsNobodyLimitsAreNotMeasured(t *testing.T) {
	t.Parallel()
	limiter := switchedLimiter{&fakeLimiter{client: "noisy", kind: quota.ProducerByteRate, throttle: 20 * time.Millisecond}, map[quota.Kind]bool{}}
	tb := startBroker(t, withConfig(func(c *Config) { c.Quotas = limiter }))
	tb.createTopic("logs", 1, nil)
	c := dial(t, tb.addr)
	produce := produceOne(t, "logs")
	c.sendAs("noisy", produce, 1)
	if resp := c.readResponse(produce, 1).(*kmsg.ProduceResponse); resp.ThrottleMillis != 0 {
		t.Errorf("produce with no quota on anywhere: throttle_time_ms %d", resp.ThrottleMillis)
	}
	freq := fetchRequest(11, 0, 0, 1<<20, fetchPart{topic: "logs", maxBytes: 1 << 20})
	c.sendAs("noisy", freq, 2)
	c.readResponse(freq, 2)
	limiter.mu.Lock()
	calls := len(limiter.calls)
	limiter.mu.Unlock()
	if calls != 0 {
		t.Fatalf("the Limiter was asked %d times with no kind on, want none", calls)
	}

	limiter.on = map[quota.Kind]bool{quota.ProducerByteRate: true}
	tb2 := startBroker(t, withConfig(func(c *Config) { c.Quotas = limiter }))
	tb2.createTopic("logs", 1, nil)
	c2 := dial(t, tb2.addr)
	c2.sendAs("noisy", produce, 1)
	if resp := c2.readResponse(produce, 1).(*kmsg.ProduceResponse); resp.ThrottleMillis <= 0 {
		t.Errorf("produce over its producer_byte_rate: throttle_time_ms %d, want > 0", resp.ThrottleMillis)
	}
	if got := limiter.recorded(quota.ProducerByteRate); len(got) != 1 {
		t.Errorf("producer_byte_rate records %+v, want the one produce", got)
	}
	if got := limiter.recorded(quota.RequestPercentage); len(got) != 0 {
		t.Errorf("request_percentage records %+v with that kind off, want none", got)
	}
}

// TestQuotaMuteHoldsTheRequestAfterAParkedFetch: a long-poll Fetch is
// handled off the reader, which meanwhile waits for the next request. The
// throttle that Fetch earns must still hold that next request, sent as
// soon as the Fetch's answer arrived (librdkafka and kafka-python do not
// wait out throttle_time_ms themselves): Kafka reads nothing more from a
// throttled connection until its throttle ends (KIP-219).
func TestQuotaMuteHoldsTheRequestAfterAParkedFetch(t *testing.T) {
	t.Parallel()
	const throttle = time.Second
	limiter := &fakeLimiter{client: "noisy", kind: quota.ConsumerByteRate, throttle: throttle}
	tb := startBroker(t, withConfig(func(c *Config) { c.Quotas = limiter }))
	tb.createTopic("logs", 1, nil)
	quiet := dial(t, tb.addr)
	produce := produceOne(t, "logs")
	quiet.sendAs("quiet", produce, 1)
	quiet.readResponse(produce, 1)

	// Min bytes beyond what the log holds: the fetch parks for its max
	// wait, then answers the one record, over the quota.
	noisy := dial(t, tb.addr)
	fetch := fetchRequest(11, 200*time.Millisecond, 1<<20, 1<<20, fetchPart{topic: "logs", maxBytes: 1 << 20})
	noisy.sendAs("noisy", fetch, 1)
	if resp := noisy.readResponse(fetch, 1).(*kmsg.FetchResponse); resp.ThrottleMillis <= 0 {
		t.Fatalf("the fetch over its quota: throttle_time_ms %d, want > 0", resp.ThrottleMillis)
	}
	next := apiVersions()
	noisy.sendAs("noisy", next, 2)
	noisy.readResponse(next, 2)

	fetched := limiter.recorded(quota.ConsumerByteRate)
	var handled []fakeCall
	for _, c := range limiter.recorded(quota.RequestPercentage) {
		if c.clientID == "noisy" {
			handled = append(handled, c)
		}
	}
	if len(fetched) != 1 || len(handled) != 1 {
		t.Fatalf("recorded %d fetches and %d timed requests of the noisy client, want 1 and the ApiVersions", len(fetched), len(handled))
	}
	if got := handled[0].now.Sub(fetched[0].now); got < throttle {
		t.Errorf("the request after the throttled fetch was handled %v after it, within the %v mute", got, throttle)
	}
}
