package kafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
	"millrace/broker/coord"
	"millrace/internal/certs"
	"millrace/internal/waitfor"
)

func TestListenerConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  map[string]string
		err  string // substring of the Validate error; empty for valid
	}{
		{"host:port", map[string]string{"listeners": "127.0.0.1:9092"}, ""},
		{"two named", map[string]string{"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093", "inter.broker.listener.name": "sasl_plaintext"}, ""},
		{"custom names", map[string]string{"listeners": "INTERNAL://127.0.0.1:9093,EXTERNAL://0.0.0.0:9094", "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT", "advertised.listeners": "EXTERNAL://kafka.example:9094"}, ""},
		{"SSL with a keystore", map[string]string{"listeners": "SSL://:9093", "ssl.keystore.location": "k.pem"}, ""},
		{"empty", map[string]string{"listeners": ""}, "no listener"},
		{"unmapped name", map[string]string{"listeners": "INTERNAL://:9093"}, "no security protocol"},
		{"unknown protocol", map[string]string{"listener.security.protocol.map": "PLAINTEXT:TLS"}, "unknown security protocol"},
		{"duplicate name", map[string]string{"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "used twice"},
		{"duplicate port", map[string]string{"listeners": "PLAINTEXT://:9092,SSL://127.0.0.1:9092", "ssl.keystore.location": "k.pem"}, "both use port 9092"},
		{"bad port", map[string]string{"listeners": "PLAINTEXT://:99999"}, "not a number"},
		{"SSL without keystore", map[string]string{"listeners": "SSL://:9093"}, "ssl.keystore.location"},
		{"client auth without truststore", map[string]string{"listeners": "SSL://:9093", "ssl.keystore.location": "k.pem", "ssl.client.auth": "required"}, "ssl.truststore.location"},
		{"bad client auth", map[string]string{"ssl.client.auth": "always"}, "ssl.client.auth"},
		{"JKS", map[string]string{"ssl.keystore.type": "JKS"}, "only PEM"},
		{"unknown inter-broker listener", map[string]string{"inter.broker.listener.name": "INTERNAL"}, "inter.broker.listener.name INTERNAL"},
		{"advertised unknown listener", map[string]string{"advertised.listeners": "SSL://h:1"}, "not one of the listeners"},
		{"advertised wildcard", map[string]string{"advertised.listeners": "0.0.0.0:9092"}, "needs a host"},
		{"advertised unnamed with two listeners", map[string]string{"listeners": "PLAINTEXT://:1,SSL://:2", "ssl.keystore.location": "k", "advertised.listeners": "h:1"}, "names no listener"},
	} {
		cfg := DefaultConfig()
		for name, value := range tc.set {
			if err := cfg.Set(name, value); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		err := cfg.Validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.err)
		}
	}
}

func TestListenerSpecs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listener = "internal://127.0.0.1:9093, EXTERNAL://[::1]:0"
	cfg.ListenerSecurityProtocolMap = "INTERNAL:SSL,external:sasl_plaintext"
	specs, err := cfg.listenerSpecs()
	if err != nil {
		t.Fatal(err)
	}
	want := []listenerSpec{{"INTERNAL", protocolSSL, "127.0.0.1", 9093}, {"EXTERNAL", protocolSASLPlaintext, "::1", 0}}
	if len(specs) != 2 || specs[0] != want[0] || specs[1] != want[1] {
		t.Fatalf("specs %+v, want %+v", specs, want)
	}
	inter, err := cfg.interBrokerListener(specs)
	if err != nil || inter.name != "INTERNAL" {
		t.Fatalf("inter-broker listener %+v %v: the first without a PLAINTEXT one", inter, err)
	}
	cfg.Listener = "SSL://:1,PLAINTEXT://:2"
	cfg.ListenerSecurityProtocolMap = defaultSecurityProtocolMap
	if specs, err = cfg.listenerSpecs(); err != nil {
		t.Fatal(err)
	}
	if inter, _ := cfg.interBrokerListener(specs); inter.name != "PLAINTEXT" {
		t.Fatalf("inter-broker listener %s, want the PLAINTEXT one", inter.name)
	}
}

// rawOn dials one listener of tb's broker.
func rawOn(t *testing.T, tb *testBroker, listener string) *rawClient {
	t.Helper()
	addr := tb.broker.ListenerAddr(listener)
	if addr == nil {
		t.Fatalf("no listener %s", listener)
	}
	return dial(t, addr.String())
}

func TestMetadataPerListener(t *testing.T) {
	tb := startBroker(t, withConfig(func(c *Config) {
		c.Listener = "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0"
		c.ListenerSecurityProtocolMap = "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"
		c.AdvertisedListener = "EXTERNAL://ext.example:19094"
		c.InterBrokerListenerName = "INTERNAL"
	}))
	internalPort := int32(tb.broker.ListenerAddr("INTERNAL").(*net.TCPAddr).Port)
	if tb.broker.Addr().String() != tb.broker.ListenerAddr("INTERNAL").String() {
		t.Fatalf("Addr %v is not the inter-broker listener's %v", tb.broker.Addr(), tb.broker.ListenerAddr("INTERNAL"))
	}
	// A second broker with only the INTERNAL listener, leader of
	// nothing: EXTERNAL clients must not be told of it.
	other, _ := json.Marshal(map[string]any{"version": 4, "host": "other", "port": 1, "endpoints": []string{"INTERNAL://other:1"}, "listener_security_protocol_map": map[string]string{"INTERNAL": "PLAINTEXT"}})
	if _, err := tb.store.Create("/brokers/ids/7", other, coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 10*time.Second, "broker 7 in the model", func() bool { _, ok := tb.cluster.Broker(7); return ok })

	type addr struct {
		host string
		port int32
	}
	for _, tc := range []struct {
		listener string
		want     map[int32]addr
	}{
		{"INTERNAL", map[int32]addr{0: {"127.0.0.1", internalPort}, 7: {"other", 1}}},
		{"EXTERNAL", map[int32]addr{0: {"ext.example", 19094}}},
	} {
		c := rawOn(t, tb, tc.listener)
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		meta := c.roundTrip(req, 1).(*kmsg.MetadataResponse)
		got := map[int32]addr{}
		for _, b := range meta.Brokers {
			got[b.NodeID] = addr{b.Host, b.Port}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: Metadata brokers %v, want %v", tc.listener, got, tc.want)
		}
		for id, a := range tc.want {
			if got[id] != a {
				t.Errorf("%s: Metadata broker %d at %v, want %v", tc.listener, id, got[id], a)
			}
		}

		dc := kmsg.NewPtrDescribeClusterRequest()
		described := c.roundTrip(dc, 2).(*kmsg.DescribeClusterResponse)
		if len(described.Brokers) != len(tc.want) {
			t.Errorf("%s: DescribeCluster brokers %+v", tc.listener, described.Brokers)
		}
		for _, b := range described.Brokers {
			if (addr{b.Host, b.Port}) != tc.want[b.NodeID] {
				t.Errorf("%s: DescribeCluster broker %d at %s:%d", tc.listener, b.NodeID, b.Host, b.Port)
			}
		}

		// Broker 0 coordinates a group for which it wins the hash.
		group := ""
		for i := 0; group == ""; i++ {
			if coordinator, _, _ := tb.cluster.GroupCoordinator("g" + string(rune('a'+i))); coordinator.ID == 0 {
				group = "g" + string(rune('a'+i))
			}
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.SetVersion(3)
		fc.CoordinatorKey = group
		found := c.roundTrip(fc, 3).(*kmsg.FindCoordinatorResponse)
		if found.ErrorCode != 0 || (addr{found.Host, found.Port}) != tc.want[0] {
			t.Errorf("%s: FindCoordinator %s:%d error %d, want %v", tc.listener, found.Host, found.Port, found.ErrorCode, tc.want[0])
		}
	}

	// A partition led by the broker without EXTERNAL is named as such.
	live := map[int32]bool{0: true, 7: true}
	reachable := map[int32]bool{0: true}
	topic, err := tb.cluster.CreateTopic(cluster.TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	led := *topic
	part := *topic.Partitions[0]
	part.Leader = 7
	led.Partitions = append(led.Partitions[:0:0], &part)
	if p := metadataTopic(&led, live, reachable, 12, false).Partitions[0]; p.ErrorCode != kerr.ListenerNotFound.Code || p.Leader != -1 {
		t.Errorf("partition led by a broker without the listener: error %d leader %d", p.ErrorCode, p.Leader)
	}
}

// testPKI makes a CA, a server keystore for 127.0.0.1 and a client keystore
// for CN=alice,O=acme.
func testPKI(t *testing.T) (ca *certs.CA, server, client string) {
	t.Helper()
	dir := t.TempDir()
	ca, err := certs.NewCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	server, client = filepath.Join(dir, "server.pem"), filepath.Join(dir, "client.pem")
	if _, err := ca.Issue(server, certs.Options{CommonName: "broker", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(client, certs.Options{CommonName: "alice", Organization: "acme", Usage: certs.Client}); err != nil {
		t.Fatal(err)
	}
	return ca, server, client
}

func clientTLS(t *testing.T, ca *certs.CA, keystore string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(ca.CertFile())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: roots}
	if keystore != "" {
		pair, err := tls.LoadX509KeyPair(keystore, keystore)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

func TestTLSListener(t *testing.T) {
	ca, server, client := testPKI(t)
	tb := startBroker(t, withConfig(func(c *Config) {
		c.Listener = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"
		c.SSLKeystoreLocation = server
		c.SSLTruststoreLocation = ca.CertFile()
		c.SSLClientAuth = "required"
		c.RequestReadTimeout = time.Second
	}))
	sslAddr := tb.broker.ListenerAddr("SSL").String()

	// A client certificate names the principal.
	nc, err := tls.Dial("tcp", sslAddr, clientTLS(t, ca, client))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	raw := &rawClient{t: t, nc: nc}
	meta := raw.roundTrip(kmsg.NewPtrMetadataRequest(), 1).(*kmsg.MetadataResponse)
	if len(meta.Brokers) != 1 || meta.Brokers[0].Port != int32(tb.broker.ListenerAddr("SSL").(*net.TCPAddr).Port) {
		t.Fatalf("Metadata over SSL gave brokers %+v, want the SSL listener's address", meta.Brokers)
	}
	if !strings.Contains(tb.logOut.String(), `principal="User:CN=alice,O=acme"`) {
		t.Fatalf("no handshake with principal User:CN=alice,O=acme in the log:\n%s", tb.logOut.String())
	}

	// Without one the handshake fails (TLS 1.3 reports it on first read).
	bare, err := tls.Dial("tcp", sslAddr, clientTLS(t, ca, ""))
	if err == nil {
		t.Cleanup(func() { bare.Close() })
		bare.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err = bare.Write(frame(kmsg.NewPtrMetadataRequest(), 1)); err == nil {
			_, err = bare.Read(make([]byte, 1))
		}
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client without a certificate got %v, want a certificate error", err)
	}

	// A stalled handshake does not hold up accepting: a TCP connection
	// that sends nothing sits beside a client that completes.
	stalled, err := net.Dial("tcp", sslAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	defer (&rawClient{t: t, nc: stalled}).expectClosed() // after millrace.request.read.timeout.ms

	// Records larger than a TLS record go through the TLS writer, not
	// sendfile.
	kc, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(clientTLS(t, ca, client)),
		kgo.ConsumeTopics("big"), kgo.AllowAutoTopicCreation(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	value := make([]byte, 512<<10)
	rand.Read(value)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kc.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for {
		fetches := kc.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatal(err)
		}
		if records := fetches.Records(); len(records) > 0 {
			if !bytes.Equal(records[0].Value, value) {
				t.Fatal("the record fetched over TLS differs from the one produced")
			}
			return
		}
	}
}

// BenchmarkProduceTLS produces b.N records through franz-go (idempotent,
// acks=all) over a PLAINTEXT and an SSL listener of the same broker, the
// cost of TLS per record size.
func BenchmarkProduceTLS(b *testing.B) {
	dir := b.TempDir()
	ca, err := certs.NewCA(dir, "bench CA")
	if err != nil {
		b.Fatal(err)
	}
	server := filepath.Join(dir, "server.pem")
	if _, err := ca.Issue(server, certs.Options{CommonName: "broker", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}); err != nil {
		b.Fatal(err)
	}
	pem, err := os.ReadFile(ca.CertFile())
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tb := startBroker(b, withConfig(func(c *Config) {
		c.Listener = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"
		c.SSLKeystoreLocation = server
	}))
	for _, listener := range []string{"PLAINTEXT", "SSL"} {
		for _, size := range []int{100, 1024} {
			b.Run(fmt.Sprintf("%s/record=%d", listener, size), func(b *testing.B) {
				opts := []kgo.Opt{kgo.DefaultProduceTopic(fmt.Sprintf("bench-%s-%d", listener, size)), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(time.Millisecond),
					// Uncompressed, so TLS encrypts every record byte.
					kgo.ProducerBatchCompression(kgo.NoCompression())}
				if listener == "SSL" {
					opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: roots}))
				}
				prod := newClient(b, tb.broker.ListenerAddr(listener).String(), opts...)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				value := make([]byte, size)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for range b.N {
					prod.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
						if err != nil {
							b.Error(err)
						}
					})
				}
				if err := prod.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
