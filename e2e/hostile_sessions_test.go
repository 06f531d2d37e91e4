package e2e

// Hostile clients against the state a broker keeps for fetch sessions
// (KIP-227) and transactional IDs: each probe is refused with its Kafka
// error or bounded, the broker's peak resident set stays under 512 MiB,
// and legitimate clients are still served.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// hostileFetch is an epoch-0 Fetch v12 (topics by name) asking for a new
// session over partitions 0..n-1 of topic.
func hostileFetch(topic string, n int) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p := range n {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = int32(p), 1<<10
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// TestHostileFetchSessions: epoch-0 fetches of 10,000 partitions of a
// topic that does not exist, as User:ANONYMOUS under an authorizer with no
// ACL for it and with one, leave nothing cached; sessions of real
// partitions stay within the bounds per connection, per principal and in
// bytes; a consumer is served throughout.
func TestHostileFetchSessions(t *testing.T) {
	t.Parallel()
	data, secrets := t.TempDir(), t.TempDir()
	adminFile := writeSecret(t, secrets, "admin", "admin-pw")
	run(t, time.Minute, "", millraceBin, "user", "add", "admin", "--data", data, "--password-file", adminFile)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	saslAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	const perPrincipal, budget = 6, 400 << 10
	b := startProcess(t, "broker", "broker", "--data", data, "--id", "1", "--metrics-listen", metricsAddr,
		"--set", "listeners=PLAINTEXT://"+addr+",SASL_PLAINTEXT://"+saslAddr,
		"--set", "authorizer.class.name=millrace", "--set", "super.users=User:admin",
		// Small enough that the test reaches them; the defaults are in
		// docs/limits.md.
		"--set", "millrace.fetch.sessions.per.principal="+strconv.Itoa(perPrincipal),
		"--set", "millrace.fetch.session.cache.max.bytes="+strconv.Itoa(budget),
		// Every session is evictable at once under Kafka's rules, so new
		// ones keep coming in within the bounds.
		"--set", "min.incremental.fetch.session.eviction.ms=0")
	admin := []kgo.Opt{kgo.SASL(plain.Auth{User: "admin", Pass: "admin-pw"}.AsMechanism())}
	waitAnswers(t, b, saslAddr, admin...)
	metrics := "http://" + metricsAddr + "/metrics"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	adminClient, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(saslAddr)}, admin...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer adminClient.Close()
	adm := kadm.NewClient(adminClient)
	const wide = 300
	if _, err := adm.CreateTopic(ctx, wide, 1, nil, "open-wide"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "open-steady"); err != nil {
		t.Fatal(err)
	}
	// Anonymous clients may use the open- topics, and nothing else.
	acls := kadm.NewACLs().Allow("User:ANONYMOUS").Topics("open-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll)
	if results, err := adm.CreateACLs(ctx, acls); err != nil || results[0].Err != nil {
		t.Fatalf("CreateACLs: %v %+v", err, results)
	}
	if results, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:ANONYMOUS").Clusters().Operations(kadm.OpIdempotentWrite)); err != nil || results[0].Err != nil {
		t.Fatalf("CreateACLs: %v %+v", err, results)
	}

	// anonymous is a client of its own connections, pinned to versions
	// that name topics (Fetch v12).
	anonymous := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V3_0_0())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	fetch := func(cl *kgo.Client, req *kmsg.FetchRequest) *kmsg.FetchResponse {
		t.Helper()
		resp, err := cl.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		return resp.(*kmsg.FetchResponse)
	}
	gauge := func(name string) int { return int(scrapeCounter(t, metrics, name)) }
	cached := func() (sessions, partitions, bytes int) {
		return gauge("millrace_broker_fetch_sessions"), gauge("millrace_broker_fetch_session_partitions"), gauge("millrace_broker_fetch_session_bytes")
	}

	// A consumer that must be served before, during and after.
	producer := anonymous(kgo.DefaultProduceTopic("open-steady"))
	consumer := anonymous(kgo.ConsumeTopics("open-steady"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	consumed := 0
	consume := func(value string) {
		t.Helper()
		produceOne(ctx, t, producer, "open-steady", value)
		for got := ""; got != value; {
			fs := consumer.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("consumer: %v", err)
			}
			fs.EachRecord(func(r *kgo.Record) { got = string(r.Value); consumed++ })
		}
	}
	consume("before")

	// The hostile fetches: 150 epoch-0 fetches of 10,000 partitions each,
	// from 15 connections, of a topic without ACLs (refused) and of one
	// the ACLs would allow but that does not exist. 150 is enough that,
	// were the partitions cached (at the 425 bytes each they used to
	// cost), the broker would pass the peak RSS bound.
	for _, tc := range []struct {
		topic string
		want  int16
	}{{"nowhere", kerr.TopicAuthorizationFailed.Code}, {"open-nowhere", kerr.UnknownTopicOrPartition.Code}} {
		var wg sync.WaitGroup
		var mu sync.Mutex
		wrong := map[string]int{}
		for range 15 {
			cl := anonymous()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					resp := fetch(cl, hostileFetch(tc.topic, 10_000))
					mu.Lock()
					if resp.SessionID != 0 {
						wrong["a session"]++
					}
					for _, rt := range resp.Topics {
						for _, rp := range rt.Partitions {
							if rp.ErrorCode != tc.want {
								wrong[kerr.ErrorForCode(rp.ErrorCode).Error()]++
							}
						}
					}
					mu.Unlock()
				}
			}()
		}
		consume("during " + tc.topic)
		wg.Wait()
		if len(wrong) > 0 {
			t.Errorf("fetches of %s: answers other than %v: %v", tc.topic, kerr.ErrorForCode(tc.want), wrong)
		}
		if s, p, _ := cached(); p > 1 || s > 1 {
			t.Errorf("after the fetches of %s the broker holds %d sessions of %d partitions; want none but the consumer's", tc.topic, s, p)
		}
	}

	// One connection opening 10 sessions keeps millrace.fetch.sessions.per.connection (4).
	one := anonymous()
	before, _, _ := cached()
	for range 10 {
		if resp := fetch(one, hostileFetch("open-wide", 10)); resp.SessionID == 0 {
			t.Fatal("no session for a connection below its bounds")
		}
	}
	if s, _, _ := cached(); s-before != 4 {
		t.Errorf("one connection that opened 10 sessions holds %d, want 4", s-before)
	}
	// 20 connections each opening a session: the principal keeps at most
	// perPrincipal.
	for range 20 {
		fetch(anonymous(), hostileFetch("open-wide", 10))
	}
	if s, _, _ := cached(); s != perPrincipal {
		t.Errorf("after 20 connections of one principal opened sessions the broker holds %d, want %d", s, perPrincipal)
	}
	// 40 connections each opening sessions of the whole topic: they hold
	// at most the byte budget (3 such sessions).
	var wg sync.WaitGroup
	for range 40 {
		cl := anonymous()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				fetch(cl, hostileFetch("open-wide", wide))
			}
		}()
	}
	wg.Wait()
	consume("after")
	sessions, partitions, bytes := cached()
	t.Logf("after the session flood: %d sessions of %d partitions, %d bytes counted; %d records consumed", sessions, partitions, bytes, consumed)
	if sessions > perPrincipal || bytes > budget || partitions*400 > budget || partitions < wide {
		t.Errorf("the broker holds %d sessions of %d partitions (%d bytes); want at most %d sessions and %d bytes, and one of the wide sessions", sessions, partitions, bytes, perPrincipal, budget)
	}
	if evicted := scrapeCounter(t, metrics, "millrace_broker_fetch_session_evictions_total"); evicted == 0 {
		t.Error("no session was evicted")
	}
	peak := peakRSSKiB(t, b.pid()) >> 10
	t.Logf("broker peak RSS %d MiB", peak)
	if peak >= 512 {
		t.Errorf("broker peak RSS %d MiB, want < 512", peak)
	}
}

// TestHostileTransactionalIDs: InitProducerId with 900 KB transactional
// IDs gets INVALID_REQUEST and stores nothing; distinct small IDs stop at
// millrace.max.transactional.ids.per.principal and
// millrace.max.transactional.ids with POLICY_VIOLATION, also after a
// restart; a transactional producer with a stored ID still commits.
func TestHostileTransactionalIDs(t *testing.T) {
	t.Parallel()
	data, secrets := t.TempDir(), t.TempDir()
	pass := map[string]string{"alice": "alice-pw", "bob": "bob-pw"}
	for user, pw := range pass {
		run(t, time.Minute, "", millraceBin, "user", "add", user, "--data", data, "--password-file", writeSecret(t, secrets, user, pw))
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	const perPrincipal, all = 20, 30
	b := startProcess(t, "broker", "broker", "--data", data, "--id", "1",
		"--set", "listeners=SASL_PLAINTEXT://"+addr,
		"--set", "millrace.max.transactional.ids.per.principal="+strconv.Itoa(perPrincipal),
		"--set", "millrace.max.transactional.ids="+strconv.Itoa(all))
	as := func(user string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V3_0_0()),
			kgo.SASL(plain.Auth{User: user, Pass: pass[user]}.AsMechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	waitAnswers(t, b, addr, kgo.SASL(plain.Auth{User: "alice", Pass: pass["alice"]}.AsMechanism()))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(as("alice")).CreateTopic(ctx, 1, 1, nil, "txn"); err != nil {
		t.Fatal(err)
	}
	initID := func(cl *kgo.Client, id string) int16 {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &id, 60000
		resp, err := cl.Broker(1).Request(ctx, req)
		if err != nil {
			t.Fatalf("InitProducerId for a %d-byte ID: %v", len(id), err)
		}
		return resp.(*kmsg.InitProducerIDResponse).ErrorCode
	}
	alice, bob := as("alice"), as("bob")

	// 20 IDs of 900 KB: refused before anything is stored.
	for i := range 20 {
		huge := strings.Repeat(strconv.Itoa(i%10), 900_000)
		if code := initID(alice, huge); code != kerr.InvalidRequest.Code {
			t.Fatalf("InitProducerId with a 900 KB ID: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
		}
	}
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorType, find.CoordinatorKeys = 1, []string{strings.Repeat("x", 900_000)} // v4: batched keys
	if resp, err := alice.Broker(1).Request(ctx, find); err != nil || len(resp.(*kmsg.FindCoordinatorResponse).Coordinators) != 1 ||
		resp.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("FindCoordinator with a 900 KB ID: %v %+v, want INVALID_REQUEST", err, resp)
	}
	if listed, err := kadm.NewClient(alice).ListTransactions(ctx, nil, nil); err != nil || len(listed) != 0 {
		t.Fatalf("after the huge IDs the broker lists %d transactional IDs (%v), want none", len(listed), err)
	}

	// Distinct small IDs: alice stops at her bound, bob at what is left.
	count := func(cl *kgo.Client, prefix string, n int) map[int16]int {
		codes := map[int16]int{}
		for i := range n {
			codes[initID(cl, fmt.Sprintf("%s-%d", prefix, i))]++
		}
		return codes
	}
	if codes := count(alice, "alice", perPrincipal+10); codes[0] != perPrincipal || codes[kerr.PolicyViolation.Code] != 10 {
		t.Fatalf("alice's %d new IDs: %v (code: count), want %d accepted and the rest POLICY_VIOLATION", perPrincipal+10, codes, perPrincipal)
	}
	if codes := count(bob, "bob", 20); codes[0] != all-perPrincipal || codes[kerr.PolicyViolation.Code] != 20-(all-perPrincipal) {
		t.Fatalf("bob's 20 new IDs: %v (code: count), want %d accepted and the rest POLICY_VIOLATION", codes, all-perPrincipal)
	}

	// A producer with a stored ID is served; a new one is refused with the reason.
	commit := func(id string) error {
		cl := as("alice", kgo.TransactionalID(id), kgo.DefaultProduceTopic("txn"), kgo.RequestRetries(2))
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, kgo.StringRecord("committed by "+id)).FirstErr(); err != nil {
			return err
		}
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	if err := commit("alice-0"); err != nil {
		t.Fatalf("a transaction of a stored ID: %v", err)
	}
	if err := commit("alice-new"); err == nil || !strings.Contains(err.Error(), kerr.PolicyViolation.Message) {
		t.Fatalf("a transaction of a new ID past the bound: %v, want POLICY_VIOLATION", err)
	}

	if peak := peakRSSKiB(t, b.pid()) >> 10; peak >= 512 {
		t.Errorf("broker peak RSS %d MiB before the restart, want < 512", peak)
	}

	// After a restart the stored IDs are counted again.
	b.stop(syscall.SIGTERM, 15*time.Second)
	b.start()
	waitAnswers(t, b, addr, kgo.SASL(plain.Auth{User: "alice", Pass: pass["alice"]}.AsMechanism()))
	alice = as("alice")
	if code := initID(alice, "alice-after-restart"); code != kerr.PolicyViolation.Code {
		t.Fatalf("a new ID after a restart: %v, want POLICY_VIOLATION", kerr.ErrorForCode(code))
	}
	if code := initID(alice, "alice-1"); code != 0 {
		t.Fatalf("a stored ID after a restart: %v", kerr.ErrorForCode(code))
	}
	peak := peakRSSKiB(t, b.pid()) >> 10
	t.Logf("broker peak RSS %d MiB", peak)
	if peak >= 512 {
		t.Errorf("broker peak RSS %d MiB, want < 512", peak)
	}
}
