package e2e

// The failover test on a secured cluster: three ZooKeeper brokers whose only
// listener is SASL_SSL (clients and replication alike), replicating as a
// SCRAM user made with `millrace user add --zookeeper` before they start,
// with ACLs on. Leaders are killed while a producer holding only Write and
// IdempotentWrite writes with acks=all; afterwards a consumer holding only
// Read finds every acknowledged record exactly once.

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"millrace/internal/certs"
	"millrace/internal/waitfor"
	"millrace/internal/zktest"
)

// TestClusterSecureFailoverLosesNothing kills partition leaders of an RF 3,
// min.insync.replicas=2 topic on a SASL_SSL cluster with ACLs on while an
// idempotent acks=all producer writes. A follower that could not
// authenticate over TLS, or lacked ClusterAction, would leave the ISR and
// fail acks=all; one that replicated anyway without it would show as lost
// or duplicated records.
func TestClusterSecureFailoverLosesNothing(t *testing.T) {
	t.Parallel()
	const topic, group, partitions, kills = "secure-failover", "secure-readers", 3, 6
	c, as := startSecureCluster(t, map[string]string{"broker": "replicate-me", "admin": "admin-pw", "producer": "producer-pw", "consumer": "consumer-pw"})
	adm := c.admin()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	two := "2"
	if resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &two}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	acls := []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:producer").Topics(topic).Operations(kadm.OpWrite),
		kadm.NewACLs().Allow("User:producer").Clusters().Operations(kadm.OpIdempotentWrite),
		kadm.NewACLs().Allow("User:consumer").Topics(topic).Groups(group).Operations(kadm.OpRead),
	}
	for _, b := range acls {
		results, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatalf("CreateAcls: %v", err)
		}
		for _, r := range results {
			if r.Err != nil {
				t.Fatalf("CreateAcls %s: %v", r.Principal, r.Err)
			}
		}
	}
	waitfor.Until(c.t, 30*time.Second, "the new topic to be fully replicated", func() bool { return c.fullyReplicated(adm, topic) })
	// Brokers apply ACL changes in the order they were made: one that
	// shows the consumer the topic (its Read implies Describe) has the
	// producer's ACLs too.
	waitfor.Until(c.t, 10*time.Second, "every broker to have the ACLs", func() bool {
		for _, node := range c.nodes {
			if !describes(node, topic, as("consumer")...) {
				return false
			}
		}
		return true
	})

	// The same harness, the clients authenticated as the two users.
	producer, consumer := *c, *c
	producer.clientOpts, consumer.clientOpts = as("producer"), as("consumer")

	// ACLs are on: the consumer may not write.
	denied := consumer.client(kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	if err := denied.ProduceSync(ctx, &kgo.Record{Value: []byte("-1")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("the consumer produced: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	stop := make(chan struct{})
	acks, producerDone := produceContinuously(t, &producer, topic, stop)
	moves := killLeaders(t, c, adm, topic, partitions, kills, acks)
	close(stop)
	<-producerDone
	t.Logf("leadership moves: %d, median %v; records acknowledged: %d (failed: %d)", len(moves), median(moves).Round(time.Millisecond), acks.count(), acks.failed)
	waitfor.Until(c.t, 60*time.Second, "full replication at the end", func() bool { return c.fullyReplicated(adm, topic) })

	got := readAll(t, &consumer, topic, partitions)
	checkAcknowledged(t, acks, got)
	checkAckedValuesOnce(t, acks, got)
	// The consumer's group Read: it commits what it read.
	offsets := kadm.Offsets{}
	for p, recs := range got {
		if len(recs) > 0 {
			offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: recs[len(recs)-1].offset + 1, LeaderEpoch: -1})
		}
	}
	if err := kadm.NewClient(consumer.client()).CommitAllOffsets(ctx, group, offsets); err != nil {
		t.Fatalf("the consumer committing to its group: %v", err)
	}
	c.checkReplicasIdentical(topic, partitions)
}

// describes reports whether node itself lists topic in Metadata to a client
// with opts.
func describes(node *clusterNode, topic string, opts ...kgo.Opt) bool {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(node.addr)}, opts...)...)
	if err != nil {
		return false
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	return err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0
}

// startSecureCluster starts three ZooKeeper brokers whose only listener is
// SASL_SSL (clients and replication alike), replicating as the SCRAM user
// "broker" made with `millrace user add --zookeeper` before they start,
// with ACLs on and "broker" and "admin" super users. passwords holds every
// user to create ("broker" and "admin" among them); as gives a user's
// client options, and the cluster's own clients are admin's.
func startSecureCluster(t *testing.T, passwords map[string]string) (c *localCluster, as func(user string) []kgo.Opt) {
	t.Helper()
	zk := zktest.Start(t)
	dir := t.TempDir()
	ca, err := certs.NewCA(dir, "millrace e2e CA")
	if err != nil {
		t.Fatal(err)
	}
	keystore := filepath.Join(dir, "broker.pem")
	if _, err := ca.Issue(keystore, certs.Options{CommonName: "broker", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}); err != nil {
		t.Fatal(err)
	}
	pki := testPKI{ca: ca.CertFile()}
	files := map[string]string{}
	for user, pw := range passwords {
		files[user] = writeSecret(t, dir, user, pw)
		run(t, time.Minute, "", millraceBin, "user", "add", user, "--zookeeper", zk.Connect(), "--password-file", files[user])
	}
	as = func(user string) []kgo.Opt {
		return []kgo.Opt{kgo.DialTLSConfig(pki.clientTLS(t, false)),
			kgo.SASL(scram.Auth{User: user, Pass: passwords[user]}.AsSha512Mechanism())}
	}

	c = &localCluster{t: t, dir: dir, zk: zk.Connect(), nodes: map[int32]*clusterNode{}, clientOpts: as("admin")}
	for id := int32(1); id <= 3; id++ {
		addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		data := t.TempDir()
		args := []string{"broker", "--data", data, "--id", strconv.Itoa(int(id)), "--zookeeper", zk.Connect(),
			"--set", "listeners=SASL_SSL://" + addr,
			"--set", "inter.broker.listener.name=SASL_SSL",
			"--set", "ssl.keystore.location=" + keystore,
			"--set", "ssl.truststore.location=" + pki.ca,
			"--set", "sasl.enabled.mechanisms=SCRAM-SHA-512",
			"--set", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
			"--set", "millrace.inter.broker.sasl.username=broker",
			"--set", "millrace.inter.broker.sasl.password.file=" + files["broker"],
			"--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
			"--set", "super.users=User:broker;User:admin",
			// The short timeouts of the plain cluster tests (up.sh's).
			"--set", "zookeeper.session.timeout.ms=4000", "--set", "replica.lag.time.max.ms=3000",
			"--set", "leader.imbalance.check.interval.seconds=2", "--set", "request.timeout.ms=10000"}
		node := &clusterNode{id: id, addr: addr, args: args, data: data,
			proc: startProcess(t, "broker"+strconv.Itoa(int(id)), args...)}
		c.nodes[id] = node
		c.initial = append(c.initial, id)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, id := range c.initial {
				t.Logf("--- broker %d log (last 3 KiB) ---\n%s", id, tail([]byte(c.nodes[id].proc.log()), 3072))
			}
		}
	})
	for _, id := range c.initial {
		c.waitReady(c.nodes[id])
	}
	adm := c.admin()
	waitfor.Until(c.t, 30*time.Second, "three registered brokers", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx)
		return err == nil && len(md.Brokers) == 3
	})
	return c, as
}
