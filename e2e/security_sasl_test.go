package e2e

// SASL on a real broker process: one user made with `millrace user add
// --data` before the broker starts, another through the Kafka API (the CLI
// with -b, authenticated as the first); kcat (librdkafka), kafka-python
// and franz-go authenticate with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN,
// over SASL_PLAINTEXT and SASL_SSL; a wrong password fails each of them
// with an authentication error and a log line naming the user.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"millrace/internal/zktest"

	"millrace/internal/waitfor"
)

func writeSecret(t *testing.T, dir, name, secret string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSASLClients(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	secrets, data := t.TempDir(), t.TempDir()
	adminPass, alicePass, bobPass := "admin-secret", "alice in chains", "b0b-pw"
	adminFile := writeSecret(t, secrets, "admin", adminPass)

	// Before the broker exists: straight into its embedded store.
	run(t, time.Minute, "", millraceBin, "user", "add", "admin", "--data", data, "--password-file", adminFile)
	run(t, time.Minute, "", millraceBin, "user", "add", "alice", "--data", data, "--mechanism", "SCRAM-SHA-512",
		"--password-file", writeSecret(t, secrets, "alice", alicePass))

	plainAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	saslAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	sslAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := startProcess(t, "broker", "broker", "--data", data, "--id", "1",
		"--set", "listeners=PLAINTEXT://"+plainAddr+",SASL_PLAINTEXT://"+saslAddr+",SASL_SSL://"+sslAddr,
		"--set", "ssl.keystore.location="+pki.broker, "--set", "connection.failed.authentication.delay.ms=100")
	waitAnswers(t, b, plainAddr)

	// Through the Kafka API, authenticated as admin.
	run(t, time.Minute, "", millraceBin, "user", "add", "bob", "-b", saslAddr, "--sasl-mechanism", "SCRAM-SHA-512",
		"--sasl-username", "admin", "--sasl-password-file", adminFile,
		"--mechanism", "SCRAM-SHA-256", "--password-file", writeSecret(t, secrets, "bob", bobPass))
	listed := run(t, time.Minute, "", millraceBin, "user", "list", "-b", plainAddr)
	for _, want := range []string{"admin  SCRAM-SHA-512  4096", "alice  SCRAM-SHA-512  4096", "bob    SCRAM-SHA-256  4096"} {
		if !strings.Contains(listed, want) {
			t.Fatalf("user list lacks %q:\n%s", want, listed)
		}
	}

	// failedAs waits for the broker's log line of a failed authentication
	// as user, and checks that the password is not logged.
	failedAs := func(t *testing.T, user, password string) {
		t.Helper()
		waitfor.Until(t, 10*time.Second, "a failed-authentication log line for "+user, func() bool {
			return strings.Contains(b.log(), "SASL authentication failed") && strings.Contains(b.log(), "user="+user)
		})
		if strings.Contains(b.log(), password) {
			t.Fatal("the broker logged a password")
		}
	}

	kcat := func(addr, protocol, password, stdin string, args ...string) (string, string, error) {
		base := []string{"-b", addr, "-X", "security.protocol=" + protocol, "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=alice", "-X", "sasl.password=" + password}
		if protocol == "SASL_SSL" {
			base = append(base, "-X", "ssl.ca.location="+pki.ca)
		}
		return runErr(time.Minute, stdin, "kcat", append(base, args...)...)
	}
	for _, tc := range []struct{ protocol, addr string }{{"SASL_PLAINTEXT", saslAddr}, {"SASL_SSL", sslAddr}} {
		t.Run("kcat SCRAM-SHA-512 over "+tc.protocol, func(t *testing.T) {
			topic := "kcat-" + strings.ToLower(tc.protocol)
			if out, errOut, err := kcat(tc.addr, tc.protocol, alicePass, "one\ntwo\n", "-P", "-t", topic); err != nil {
				t.Fatalf("kcat produce: %v\n%s%s", err, out, errOut)
			}
			out, errOut, err := kcat(tc.addr, tc.protocol, alicePass, "", "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e")
			if err != nil || out != "one\ntwo\n" {
				t.Fatalf("kcat consume: %q, %v\n%s", out, err, errOut)
			}
		})
	}
	t.Run("kcat with a wrong password", func(t *testing.T) {
		_, errOut, err := kcat(sslAddr, "SASL_SSL", "not-alices", "", "-L", "-m", "5")
		if err == nil || !strings.Contains(errOut, "Authentication failed") {
			t.Fatalf("kcat -L with a wrong password: %v\n%s", err, errOut)
		}
		failedAs(t, "alice", "not-alices")
	})

	scramConf := func(user, password string) map[string]any {
		return map[string]any{"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
			"sasl_plain_username": user, "sasl_plain_password": password}
	}
	t.Run("kafka-python SCRAM-SHA-256 over SASL_PLAINTEXT", func(t *testing.T) {
		out := run(t, time.Minute, "", "/usr/bin/python3", pythonArgs(t, saslAddr, "sasl-python", scramConf("bob", bobPass))...)
		if strings.TrimSpace(out) != "py0,py1,py2" {
			t.Fatalf("kafka-python consumed %q, want py0,py1,py2", strings.TrimSpace(out))
		}
	})
	t.Run("kafka-python with a wrong password", func(t *testing.T) {
		out, errOut, err := runErr(time.Minute, "", "/usr/bin/python3", pythonArgs(t, saslAddr, "sasl-python-refused", scramConf("bob", "not-bobs"))...)
		if err == nil {
			t.Fatalf("kafka-python with a wrong password succeeded: %q", out)
		}
		// kafka-python 2.0 authenticates with raw SASL frames (a version 0
		// handshake), where Kafka reports a failure by closing the
		// connection: it fails while authenticating.
		if !strings.Contains(errOut, "<authenticating>") || !strings.Contains(errOut, "NoBrokersAvailable") {
			t.Fatalf("kafka-python failed other than while authenticating:\n%s", tail([]byte(errOut), 1000))
		}
		failedAs(t, "bob", "not-bobs")
	})

	tlsOpt := kgo.DialTLSConfig(pki.clientTLS(t, false))
	for _, tc := range []struct {
		name string
		addr string
		opts []kgo.Opt
	}{{"SASL_PLAINTEXT", saslAddr, nil}, {"SASL_SSL", sslAddr, []kgo.Opt{tlsOpt}}} {
		t.Run("franz-go PLAIN over "+tc.name, func(t *testing.T) {
			opts := append([]kgo.Opt{kgo.SASL(plain.Auth{User: "admin", Pass: adminPass}.AsMechanism())}, tc.opts...)
			produceConsume(t, []string{tc.addr}, "franz-"+strings.ToLower(tc.name), 3, opts...)
		})
	}
	t.Run("franz-go with a wrong password", func(t *testing.T) {
		for _, m := range []kgo.Opt{
			kgo.SASL(plain.Auth{User: "admin", Pass: "guess"}.AsMechanism()),
			kgo.SASL(scram.Auth{User: "admin", Pass: "guess"}.AsSha512Mechanism()),
		} {
			cl, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), tlsOpt, m)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = cl.Ping(ctx)
			cancel()
			cl.Close()
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("ping with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		}
		failedAs(t, "admin", "guess")
	})

	t.Run("no request before authentication", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := cl.Ping(ctx); err == nil {
			t.Fatal("a client without SASL was served on a SASL listener")
		}
	})
}

// TestSASLInterBrokerCluster runs three ZooKeeper brokers replicating over
// a SASL_PLAINTEXT inter-broker listener as a user made with `millrace user
// add --zookeeper` before any broker starts, with KIP-368 sessions shorter
// than the test: acks=all on a replication factor 3 topic keeps
// succeeding, and the ISR keeps all three, only if the followers
// authenticate and re-authenticate.
func TestSASLInterBrokerCluster(t *testing.T) {
	t.Parallel()
	zk := zktest.Start(t)
	secrets := t.TempDir()
	brokerPass := writeSecret(t, secrets, "broker", "replicate-me")
	run(t, time.Minute, "", millraceBin, "user", "add", "broker", "--zookeeper", zk.Connect(), "--password-file", brokerPass)
	if out := run(t, time.Minute, "", millraceBin, "user", "list", "--zookeeper", zk.Connect()); !strings.Contains(out, "broker  SCRAM-SHA-512  4096") {
		t.Fatalf("user list --zookeeper:\n%s", out)
	}
	var seeds []string
	var procs []*process
	for id := 1; id <= 3; id++ {
		client := "127.0.0.1:" + strconv.Itoa(freePort(t))
		internal := "127.0.0.1:" + strconv.Itoa(freePort(t))
		seeds = append(seeds, client)
		procs = append(procs, startProcess(t, "broker"+strconv.Itoa(id), "broker", "--data", t.TempDir(), "--id", strconv.Itoa(id), "--zookeeper", zk.Connect(),
			"--set", "listeners=CLIENT://"+client+",INTERNAL://"+internal,
			"--set", "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
			"--set", "inter.broker.listener.name=INTERNAL",
			"--set", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
			"--set", "millrace.inter.broker.sasl.username=broker",
			"--set", "millrace.inter.broker.sasl.password.file="+brokerPass,
			"--set", "connections.max.reauth.ms=1500",
			"--set", "zookeeper.session.timeout.ms=4000", "--set", "replica.lag.time.max.ms=3000"))
	}
	for i, p := range procs {
		waitAnswers(t, p, seeds[i])
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createReplicated(ctx, t, adm, "sasl-replicated")
	fullISR := func() bool {
		md, err := adm.Metadata(ctx, "sasl-replicated")
		return err == nil && len(md.Topics["sasl-replicated"].Partitions[0].ISR) == 3
	}
	waitfor.Until(t, time.Minute, "the ISR to hold all three replicas", fullISR)
	produceConsume(t, seeds, "sasl-replicated", 3)
	// Past two session lifetimes: the followers re-authenticated instead
	// of being cut off.
	time.Sleep(3500 * time.Millisecond)
	if !fullISR() {
		t.Fatal("a follower left the ISR across session lifetimes")
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "sasl-replicated", Value: []byte("later")}).FirstErr(); err != nil {
		t.Fatalf("acks=all after the session lifetimes: %v", err)
	}
	for _, p := range procs {
		if strings.Contains(p.log(), "SASL authentication failed") || strings.Contains(p.log(), "expired without re-authentication") {
			t.Fatalf("%s refused a replication connection:\n%s", p.name, tail([]byte(p.log()), 2000))
		}
	}
}
