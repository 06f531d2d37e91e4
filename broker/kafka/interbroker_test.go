package kafka

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/interbroker"
	"millrace/broker/users"
	"millrace/internal/clientauth"
)

// TestBrokerRequest sends a request over the inter-broker client to a
// registered broker (this one) and refuses an unregistered one.
func TestBrokerRequest(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tb.broker.brokers.Request(ctx, tb.broker.cfg.BrokerID, kmsg.NewPtrMetadataRequest())
	if err != nil {
		t.Fatalf("brokerRequest: %v", err)
	}
	md := resp.(*kmsg.MetadataResponse)
	if len(md.Brokers) != 1 || md.Brokers[0].NodeID != tb.broker.cfg.BrokerID {
		t.Fatalf("metadata brokers %+v, want this broker alone", md.Brokers)
	}
	if _, err := tb.broker.brokers.Request(ctx, tb.broker.cfg.BrokerID+7, kmsg.NewPtrMetadataRequest()); err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("request to an unregistered broker: %v", err)
	}
	tb.stop()
	if _, err := tb.broker.brokers.Request(ctx, tb.broker.cfg.BrokerID, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("request after Close succeeded")
	}
}

// saslInterBrokerClient is an inter-broker client to tb's SASL_PLAINTEXT
// inter-broker listener, as the configured inter-broker user.
func saslInterBrokerClient(t *testing.T, tb *testBroker, mechanism, passwordFile string) *interbroker.Client {
	t.Helper()
	c := interbroker.New(interbroker.Config{
		BrokerID: tb.broker.cfg.BrokerID,
		Cluster:  tb.cluster,
		Listener: tb.broker.interBroker,
		SASL:     clientauth.SASL{Mechanism: mechanism, Username: tb.broker.cfg.SASL.InterBrokerUsername, PasswordFile: passwordFile},
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSASLInterBrokerClient: the inter-broker client authenticates with
// the configured user and password file, with every mechanism, and
// reports a wrong password.
func TestSASLInterBrokerClient(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	os.WriteFile(good, []byte("broker-secret\n"), 0o600)
	os.WriteFile(bad, []byte("guess\n"), 0o600)
	tb := startBroker(t, withConfig(func(c *Config) {
		c.Listener = "SASL_PLAINTEXT://127.0.0.1:0"
		c.SASL.InterBrokerUsername, c.SASL.InterBrokerPasswordFile = "broker", good
		c.SASL.FailedAuthenticationDelay = 0
	}))
	addUser(t, tb, "broker", "broker-secret")
	ctx := testContext(t)
	for _, mech := range saslMechanisms {
		before := testutil.ToFloat64(tb.broker.metrics.saslAuth.WithLabelValues(mech, "ok"))
		if _, err := saslInterBrokerClient(t, tb, mech, good).Request(ctx, tb.broker.cfg.BrokerID, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatalf("%s: %v", mech, err)
		}
		if after := testutil.ToFloat64(tb.broker.metrics.saslAuth.WithLabelValues(mech, "ok")); after-before != 1 {
			t.Fatalf("%s: %v successful authentications, want 1", mech, after-before)
		}
		_, err := saslInterBrokerClient(t, tb, mech, bad).Request(ctx, tb.broker.cfg.BrokerID, kmsg.NewPtrMetadataRequest())
		if err == nil || !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
			t.Fatalf("%s: wrong password: %v", mech, err)
		}
	}
}

// TestSASLInterBrokerReauthentication: an inter-broker client told a
// session lifetime authenticates again before it ends (KIP-368), so
// requests keep being served across several lifetimes.
func TestSASLInterBrokerReauthentication(t *testing.T) {
	const lifetime = 200 * time.Millisecond
	password := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(password, []byte("broker-secret"), 0o600)
	tb := startBroker(t, withConfig(func(c *Config) {
		c.Listener = "SASL_PLAINTEXT://127.0.0.1:0"
		c.SASL.InterBrokerUsername, c.SASL.InterBrokerPasswordFile = "broker", password
		c.SASL.ConnectionsMaxReauth = lifetime
	}))
	addUser(t, tb, "broker", "broker-secret")
	client := saslInterBrokerClient(t, tb, users.SCRAMSHA512, password)
	ctx := testContext(t)
	before := testutil.ToFloat64(tb.broker.metrics.saslAuth.WithLabelValues(users.SCRAMSHA512, "ok"))
	for deadline := time.Now().Add(3 * lifetime); time.Now().Before(deadline); time.Sleep(lifetime / 4) {
		if _, err := client.Request(ctx, tb.broker.cfg.BrokerID, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatalf("a request across session lifetimes: %v", err)
		}
	}
	if after := testutil.ToFloat64(tb.broker.metrics.saslAuth.WithLabelValues(users.SCRAMSHA512, "ok")); after-before < 2 {
		t.Fatalf("%v authentications in three lifetimes", after-before)
	}
}
