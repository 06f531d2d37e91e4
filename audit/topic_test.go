package audit

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/clientauth"
)

// TestEnsureTopicAuthenticates creates the audit topic on a broker that
// requires SASL, with the options an agent passes.
func TestEnsureTopicAuthenticates(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "agent", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts, err := clientauth.Settings{SASL: &clientauth.SASL{Mechanism: "PLAIN", Username: "agent", Password: "pw"}}.Opts()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if err := EnsureTopic(short, c.ListenAddrs(), Topic); err == nil {
		t.Fatal("created the topic without authenticating")
	}
	if err := EnsureTopic(ctx, c.ListenAddrs(), Topic, opts...); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(c.ListenAddrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, Topic)
	if err != nil || !topics.Has(Topic) {
		t.Fatalf("topic %s not created: %v", Topic, err)
	}
}
