package e2e

// Named listeners and TLS on real broker processes: franz-go and
// kafka-python over SSL with client certificates, each client told the
// address of its own listener, and a ZooKeeper cluster replicating over an
// SSL inter-broker listener. Certificates come from internal/certs.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/certs"
	"millrace/internal/waitfor"
	"millrace/internal/zktest"
)

// testPKI is a CA with a broker keystore (for 127.0.0.1 and localhost) and
// a client keystore for CN=alice,O=acme.
type testPKI struct {
	ca             string // truststore
	broker, client string // keystores: key, then chain
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := certs.NewCA(dir, "millrace e2e CA")
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{ca: ca.CertFile(), broker: filepath.Join(dir, "broker.pem"), client: filepath.Join(dir, "alice.pem")}
	if _, err := ca.Issue(p.broker, certs.Options{CommonName: "broker", DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(p.client, certs.Options{CommonName: "alice", Organization: "acme", Usage: certs.Client}); err != nil {
		t.Fatal(err)
	}
	return p
}

// clientTLS trusts the CA and presents the client certificate when withCert.
func (p testPKI) clientTLS(t *testing.T, withCert bool) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(p.ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("no CA certificate")
	}
	cfg := &tls.Config{RootCAs: roots}
	if withCert {
		pair, err := tls.LoadX509KeyPair(p.client, p.client)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// brokerSettings are the --set flags of a broker with these listeners,
// requiring client certificates on its SSL listeners.
func (p testPKI) brokerSettings(listeners string, more ...string) []string {
	settings := append([]string{"listeners=" + listeners,
		"ssl.keystore.location=" + p.broker, "ssl.truststore.location=" + p.ca, "ssl.client.auth=required"}, more...)
	var args []string
	for _, s := range settings {
		args = append(args, "--set", s)
	}
	return args
}

// waitAnswers waits until a client with opts gets an answer from addr.
func waitAnswers(t *testing.T, p *process, addr string, opts ...kgo.Opt) {
	t.Helper()
	var err error
	defer reportLastSeen(t, func() string { return fmt.Sprintf("ping: %v", err) })()
	waitfor.Until(t, 30*time.Second, fmt.Sprintf("%s to answer on %s", p.name, addr), func() bool {
		cl, newErr := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
		if newErr != nil {
			t.Fatal(newErr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = cl.Ping(ctx)
		cancel()
		cl.Close()
		if err != nil {
			p.exitedEarly("answering on " + addr)
		}
		return err == nil
	})
}

// brokerPort asks addr for Metadata and returns the port it gives for
// broker id.
func brokerPort(t *testing.T, id int32, addr string, opts ...kgo.Opt) int32 {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range resp.Brokers {
		if b.NodeID == id {
			return b.Port
		}
	}
	t.Fatalf("Metadata from %s lists no broker %d: %+v", addr, id, resp.Brokers)
	return 0
}

// produceConsume produces n records to topic with acks=all and reads them
// back, with the client options given.
func produceConsume(t *testing.T, seeds []string, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	var got []string
	for len(got) < n {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("consume %s (have %d of %d): %v", topic, len(got), n, err)
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		if v != "v"+strconv.Itoa(i) {
			t.Fatalf("record %d of %s is %q", i, topic, v)
		}
	}
}

// TestTLSListeners runs one broker with a PLAINTEXT and an SSL listener
// requiring client certificates, configured by --set listeners alone.
func TestTLSListeners(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	plainPort, sslPort := freePort(t), freePort(t)
	plainAddr, sslAddr := "127.0.0.1:"+strconv.Itoa(plainPort), "127.0.0.1:"+strconv.Itoa(sslPort)
	args := append([]string{"broker", "--data", t.TempDir(), "--id", "1"},
		pki.brokerSettings("PLAINTEXT://"+plainAddr+",SSL://"+sslAddr)...)
	b := startProcess(t, "broker", args...)
	withCert := kgo.DialTLSConfig(pki.clientTLS(t, true))
	waitAnswers(t, b, sslAddr, withCert)

	t.Run("each listener advertises itself", func(t *testing.T) {
		if got := brokerPort(t, 1, plainAddr); got != int32(plainPort) {
			t.Errorf("PLAINTEXT client told port %d, want %d", got, plainPort)
		}
		if got := brokerPort(t, 1, sslAddr, withCert); got != int32(sslPort) {
			t.Errorf("SSL client told port %d, want %d", got, sslPort)
		}
	})

	t.Run("franz-go", func(t *testing.T) {
		produceConsume(t, []string{sslAddr}, "tls-franz", 3, withCert)
	})

	t.Run("kcat", func(t *testing.T) {
		tls := []string{"-b", sslAddr, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + pki.ca,
			"-X", "ssl.certificate.location=" + pki.client, "-X", "ssl.key.location=" + pki.client}
		run(t, 30*time.Second, "k0\nk1\nk2\n", "kcat", append(tls, "-P", "-t", "tls-kcat")...)
		out := run(t, 30*time.Second, "", "kcat", append(tls, "-C", "-t", "tls-kcat", "-o", "beginning", "-e", "-q")...)
		if strings.Join(strings.Fields(out), ",") != "k0,k1,k2" {
			t.Fatalf("kcat consumed %q over SSL, want k0 k1 k2", out)
		}
	})

	// kafka-python takes the keystore as both its certfile and its
	// keyfile: key and chain in one PEM file, as Kafka's PEM keystore is.
	pyTLS := map[string]any{"security_protocol": "SSL", "ssl_cafile": pki.ca, "ssl_check_hostname": true}
	pyTLSCert := map[string]any{"ssl_certfile": pki.client, "ssl_keyfile": pki.client}
	maps.Copy(pyTLSCert, pyTLS)
	t.Run("kafka-python with a client certificate", func(t *testing.T) {
		out := run(t, time.Minute, "", "/usr/bin/python3", pythonArgs(t, sslAddr, "tls-python", pyTLSCert)...)
		if strings.TrimSpace(out) != "py0,py1,py2" {
			t.Fatalf("kafka-python consumed %q, want py0,py1,py2", strings.TrimSpace(out))
		}
	})

	t.Run("kafka-python without a client certificate is refused", func(t *testing.T) {
		before := strings.Count(b.log(), "client didn't provide a certificate")
		out, errOut, err := runErr(time.Minute, "", "/usr/bin/python3", pythonArgs(t, sslAddr, "tls-refused", pyTLS)...)
		if err == nil {
			t.Fatalf("kafka-python without a certificate succeeded: %q", out)
		}
		// The refusal reaches the client as a closed TLS session or as no
		// broker answering, depending on when it notices.
		if !strings.Contains(errOut, "SSL") && !strings.Contains(errOut, "NoBrokersAvailable") {
			t.Errorf("kafka-python failed with %q, want a TLS error or NoBrokersAvailable", tail([]byte(errOut), 500))
		}
		if after := strings.Count(b.log(), "client didn't provide a certificate"); after <= before {
			t.Errorf("the broker logged no handshake refused for a missing certificate")
		}
	})
}

// TestTLSInterBrokerCluster runs three ZooKeeper brokers whose inter-broker
// listener is SSL with client certificates required: acks=all on a
// replication factor 3 topic only succeeds if the followers fetch over it.
func TestTLSInterBrokerCluster(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	zk := zktest.Start(t)
	clientAddrs := map[int32]string{}
	var procs []*process
	for id := int32(1); id <= 3; id++ {
		clientAddrs[id] = "127.0.0.1:" + strconv.Itoa(freePort(t))
		internal := "127.0.0.1:" + strconv.Itoa(freePort(t))
		args := append([]string{"broker", "--data", t.TempDir(), "--id", strconv.Itoa(int(id)), "--zookeeper", zk.Connect(), "--log-level", "debug"},
			pki.brokerSettings("CLIENT://"+clientAddrs[id]+",INTERNAL://"+internal,
				"listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:SSL", "inter.broker.listener.name=INTERNAL",
				"zookeeper.session.timeout.ms=4000", "replica.lag.time.max.ms=3000")...)
		procs = append(procs, startProcess(t, fmt.Sprintf("broker%d", id), args...))
	}
	for i, p := range procs {
		waitAnswers(t, p, clientAddrs[int32(i+1)])
	}
	seeds := []string{clientAddrs[1], clientAddrs[2], clientAddrs[3]}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createReplicated(ctx, t, adm, "tls-replicated")
	produceConsume(t, seeds, "tls-replicated", 3)
	// Clients of the CLIENT listener are told CLIENT addresses only.
	for id, addr := range clientAddrs {
		_, port, _ := net.SplitHostPort(addr)
		if got := brokerPort(t, id, seeds[0]); strconv.Itoa(int(got)) != port {
			t.Errorf("broker %d advertised on port %d to CLIENT, want %s", id, got, port)
		}
	}
	var md kadm.Metadata
	defer reportLastSeen(t, func() string { return fmt.Sprintf("%v %+v", err, md.Topics) })()
	waitfor.Until(t, time.Minute, "the ISR to hold all three replicas", func() bool {
		md, err = adm.Metadata(ctx, "tls-replicated")
		return err == nil && len(md.Topics["tls-replicated"].Partitions[0].ISR) == 3
	})
	// The leader saw its followers connect to INTERNAL with their
	// certificates.
	leader := md.Topics["tls-replicated"].Partitions[0].Leader
	if n := strings.Count(procs[leader-1].log(), `listener=INTERNAL principal="User:CN=broker"`); n < 2 {
		t.Errorf("the leader logged %d TLS handshakes of brokers on INTERNAL, want one per follower at least", n)
	}
}

// createReplicated waits for three brokers to register, then creates topic
// with one partition on all three and min.insync.replicas=2.
func createReplicated(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	// Every broker must have registered before an RF 3 topic can be
	// placed.
	waitfor.Until(t, time.Minute, "three brokers to register", func() bool {
		md, err := adm.Metadata(ctx)
		return err == nil && len(md.Brokers) == 3
	})
	two := "2"
	if resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &two}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, resp.Err)
	}
}

// pythonProduceConsume is a kafka-python client that produces py0, py1 and
// py2 to a topic with acks=all, consumes them back and prints them sorted,
// comma-separated. Its arguments are the bootstrap address, the topic and
// the JSON of the connection settings (kafka-python's keyword arguments).
const pythonProduceConsume = `
import json, logging, sys
from kafka import KafkaProducer, KafkaConsumer
logging.basicConfig(level=logging.ERROR)
addr, topic, conf = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
p = KafkaProducer(bootstrap_servers=addr, acks='all', **conf)
for i in range(3):
    p.send(topic, value=b'py%d' % i)
p.flush()
c = KafkaConsumer(topic, bootstrap_servers=addr, auto_offset_reset='earliest', consumer_timeout_ms=15000, **conf)
seen = []
for m in c:
    seen.append(m.value.decode())
    if len(seen) == 3:
        break
print(','.join(sorted(seen)))
`

// pythonArgs are python3's arguments to run pythonProduceConsume.
func pythonArgs(t *testing.T, addr, topic string, conf map[string]any) []string {
	t.Helper()
	js, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	return []string{"-c", pythonProduceConsume, addr, topic, string(js)}
}
