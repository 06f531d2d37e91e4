package e2e

// ACLs on real broker processes: principals told apart by SASL PLAIN, ACLs
// managed with `millrace acl` as a super user, franz-go clients refused
// with Kafka's authorization errors; on a 3-broker ZooKeeper cluster, an
// ACL change through CreateAcls reaches every broker within 2 s, and a
// Fetch that claims a follower's replica ID without ClusterAction is
// refused and leaves the high watermark where it was.

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"millrace/internal/waitfor"
)

func TestACLs(t *testing.T) {
	t.Parallel()
	secrets, data := t.TempDir(), t.TempDir()
	pass := map[string]string{"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
	files := map[string]string{}
	for user, pw := range pass {
		files[user] = writeSecret(t, secrets, user, pw)
		run(t, time.Minute, "", millraceBin, "user", "add", user, "--data", data, "--password-file", files[user])
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := startProcess(t, "broker", "broker", "--data", data, "--id", "1",
		"--set", "listeners=SASL_PLAINTEXT://"+addr,
		"--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"--set", "super.users=User:admin")
	as := func(user string) []kgo.Opt {
		return []kgo.Opt{kgo.SASL(plain.Auth{User: user, Pass: pass[user]}.AsMechanism())}
	}
	waitAnswers(t, b, addr, as("admin")...)
	client := func(user string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(5 * time.Second)}, as(user)...), opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	acl := func(args ...string) string {
		t.Helper()
		base := []string{"acl", "-b", addr, "--sasl-mechanism", "PLAIN", "--sasl-username", "admin", "--sasl-password-file", files["admin"]}
		return run(t, time.Minute, "", millraceBin, append(base, args...)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	adm := kadm.NewClient(client("admin"))
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "a", "b", "logs-app", "logs-secret"); err != nil {
		t.Fatal(err)
	}
	acl("add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Read", "--topic", "a")
	acl("add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "logs-", "--resource-pattern-type", "prefixed")
	acl("add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "logs-secret")
	var rows []string
	for line := range strings.Lines(acl("list")) {
		rows = append(rows, strings.Join(strings.Fields(line), " "))
	}
	listed := strings.Join(rows, "\n")
	for _, want := range []string{"Topic:LITERAL:a User:alice * Write Allow", "Topic:PREFIXED:logs- User:alice * Write Allow", "Topic:LITERAL:logs-secret User:alice * Write Deny"} {
		if !strings.Contains(listed, want) {
			t.Fatalf("acl list lacks %q:\n%s", want, listed)
		}
	}

	alice := client("alice")
	produce := func(cl *kgo.Client, topic string) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	t.Run("write on a, not on b", func(t *testing.T) {
		if err := produce(alice, "a"); err != nil {
			t.Fatalf("alice producing to a: %v", err)
		}
		if err := produce(alice, "b"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice producing to b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
	})
	t.Run("metadata hides b", func(t *testing.T) {
		md, err := kadm.NewClient(alice).Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, seen := md.Topics["b"]; seen {
			t.Fatalf("alice's metadata lists b: %v", md.Topics.Names())
		}
		if _, seen := md.Topics["a"]; !seen {
			t.Fatalf("alice's metadata lacks a: %v", md.Topics.Names())
		}
	})
	t.Run("prefixed allow and literal deny", func(t *testing.T) {
		if err := produce(alice, "logs-app"); err != nil {
			t.Fatalf("alice producing to logs-app (prefixed allow): %v", err)
		}
		if err := produce(alice, "logs-secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("alice producing to logs-secret (denied): %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		acl("remove", "--deny-principal", "User:alice", "--topic", "logs-secret")
		if err := produce(client("alice"), "logs-secret"); err != nil {
			t.Fatalf("alice producing to logs-secret once the deny is removed: %v", err)
		}
	})
	t.Run("consumer without Read on its group", func(t *testing.T) {
		cl := client("alice", kgo.ConsumeTopics("a"), kgo.ConsumerGroup("g"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		pollCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		for {
			fetches := cl.PollFetches(pollCtx)
			if pollCtx.Err() != nil {
				t.Fatal("no group authorization error within 20 s")
			}
			for _, fe := range fetches.Errors() {
				if errors.Is(fe.Err, kerr.GroupAuthorizationFailed) {
					return
				}
			}
			if fetches.NumRecords() > 0 {
				t.Fatal("alice consumed through group g without Read on it")
			}
		}
	})
	t.Run("bob may do nothing", func(t *testing.T) {
		if err := produce(client("bob"), "a"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("bob producing to a: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
		_, errOut, err := runErr(time.Minute, "", millraceBin, "acl", "list", "-b", addr, "--sasl-mechanism", "PLAIN", "--sasl-username", "bob", "--sasl-password-file", files["bob"])
		if err == nil || !strings.Contains(errOut, "CLUSTER_AUTHORIZATION_FAILED") {
			t.Fatalf("bob listing ACLs: %v\n%s", err, errOut)
		}
	})
}

// TestACLsOnCluster: three brokers on ZooKeeper with ACLs on and PLAINTEXT
// listeners, where everyone is User:ANONYMOUS: the brokers' own
// connections (from 127.0.0.1) hold every cluster operation, and a client
// connecting from 127.0.0.2 holds none, as a host-bound ACL says.
func TestACLsOnCluster(t *testing.T) {
	t.Parallel()
	c := startLocalClusterWith(t, 3, 1,
		"authorizer.class.name=millrace", "allow.everyone.if.no.acl.found=true",
		// The spoofing check below stops a follower; these keep it in the
		// ISR meanwhile, so only a fetch can move the high watermark.
		"replica.lag.time.max.ms=60000", "zookeeper.session.timeout.ms=30000")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := c.admin()
	// Before the cluster resource has an ACL, allow.everyone lets this
	// client create the one that keeps the cluster for 127.0.0.1.
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Clusters().Allow("User:ANONYMOUS").AllowHosts("127.0.0.1").Operations(kadm.OpAll))
	if err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs: %v %+v", err, res)
	}

	t.Run("a change reaches every broker within 2 s", func(t *testing.T) {
		c.createReplicatedTopic("acl-p", 1)
		start := time.Now()
		res, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("acl-p").Deny("User:ANONYMOUS").DenyHosts().Operations(kadm.OpWrite))
		if err != nil || res[0].Err != nil {
			t.Fatalf("CreateACLs: %v %+v", err, res)
		}
		denied := func(node *clusterNode) bool {
			md, err := metadataFrom(node, "acl-p")
			return err == nil && len(md.Topics) == 1 && md.Topics[0].ErrorCode == kerr.TopicAuthorizationFailed.Code
		}
		waitfor.Until(c.t, 10*time.Second, "every broker to apply the new ACL", func() bool {
			for _, node := range c.nodes {
				if !denied(node) {
					return false
				}
			}
			return true
		})
		// The brokers' caches re-read every ACL only once a minute: within
		// the wait's limit, the change came through their watches.
		t.Logf("CreateAcls to every broker refusing: %v", time.Since(start))
	})

	t.Run("a spoofed replica fetch does not move the high watermark", func(t *testing.T) {
		const topic = "acl-hw"
		cr, err := adm.CreateTopic(ctx, 1, 2, nil, topic)
		if err != nil || cr.Err != nil {
			t.Fatalf("create topic: %v %v", err, cr.Err)
		}
		waitfor.Until(c.t, 20*time.Second, "the topic to be fully replicated", func() bool { return c.fullyReplicated(adm, topic) })
		parts, err := c.partitions(adm, topic)
		if err != nil {
			t.Fatal(err)
		}
		p := parts[0]
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		topicID := md.Topics[topic].ID
		follower := p.Replicas[0]
		if follower == p.Leader {
			follower = p.Replicas[1]
		}
		// Every request from here goes to the leader alone: a client that
		// asked the stopped broker anything would wait for its timeout.
		leaderAddr := c.nodes[p.Leader].addr
		producer, err := kgo.NewClient(kgo.SeedBrokers(leaderAddr), kgo.MetadataMaxAge(time.Hour),
			kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(topic))
		if err != nil {
			t.Fatal(err)
		}
		defer producer.Close()
		hw := func() int64 {
			t.Helper()
			req := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1 // latest: the high watermark
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, producer.SeedBrokers()[0])
			if err != nil {
				t.Fatal(err)
			}
			if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("ListOffsets: error %d", code)
			}
			return resp.Topics[0].Partitions[0].Offset
		}
		produce := func() {
			t.Helper()
			if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		// A first record, replicated: the follower has fetched up to 1.
		produce()
		waitfor.Until(c.t, 10*time.Second, "the follower to replicate the first record", func() bool { return hw() == 1 })
		// Stop the real follower, so that it fetches nothing meanwhile,
		// and write a second record only the leader holds.
		c.signal(follower, syscall.SIGSTOP)
		t.Cleanup(func() { c.signal(follower, syscall.SIGCONT) })
		produce()
		const before = 1
		if got := hw(); got != before {
			t.Fatalf("high watermark %d with the follower stopped, want %d", got, before)
		}

		spoof := func(from string, replica int32) int16 {
			t.Helper()
			cl, err := kgo.NewClient(kgo.SeedBrokers(leaderAddr), kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
				return d.DialContext(ctx, network, host)
			}))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			// kgo sends the highest version both sides know: the replica
			// is named in replica_id up to v14 and replica_state from
			// v15, the topic by ID from v13.
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.ReplicaState.ID, req.MaxBytes = replica, replica, 1<<20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, topicID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = before+1, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
			if err != nil {
				t.Fatalf("fetch: %v", err)
			}
			return resp.Topics[0].Partitions[0].ErrorCode
		}
		if code := spoof("127.0.0.2", follower); code != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("fetch as replica %d from 127.0.0.2: error %d, want TOPIC_AUTHORIZATION_FAILED", follower, code)
		}
		if got := hw(); got != before {
			t.Fatalf("the refused fetch moved the high watermark from %d to %d", before, got)
		}
		// A replica ID that is not a replica of the partition is refused
		// even with ClusterAction.
		if code := spoof("127.0.0.1", 99); code != kerr.ReplicaNotAvailable.Code {
			t.Fatalf("fetch as replica 99: error %d, want REPLICA_NOT_AVAILABLE", code)
		}
		if got := hw(); got != before {
			t.Fatalf("a fetch as a non-replica moved the high watermark from %d to %d", before, got)
		}
		// The control: with ClusterAction (from 127.0.0.1) the same fetch is
		// taken as the follower's, which is why the check matters.
		if code := spoof("127.0.0.1", follower); code != 0 {
			t.Fatalf("fetch as replica %d from 127.0.0.1: error %d", follower, code)
		}
		if got := hw(); got != before+1 {
			t.Fatalf("a follower's fetch with ClusterAction left the high watermark at %d, want %d", got, before+1)
		}
	})
}
