package lake

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"millrace/internal/clientauth"
	"millrace/store"
)

func TestValidateSecurity(t *testing.T) {
	cfg := Config{Brokers: []string{"b:9093"}, Group: "g", Topics: []string{"clicks"}, Schema: "click",
		Security: clientauth.Settings{SASL: &clientauth.SASL{Mechanism: "SCRAM-SHA-1", Username: "sink", Password: "p"}}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `lake: sasl: mechanism "SCRAM-SHA-1" is not one of`) {
		t.Errorf("Validate: %v", err)
	}
	cfg.Security.SASL.Mechanism = "SCRAM-SHA-256"
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestWorkerAuthenticates lands records from a broker that requires SASL:
// the worker's group consumer, its topic creation and its audit records
// all authenticate; with a wrong password the worker does not start.
func TestWorkerAuthenticates(t *testing.T) {
	t.Parallel()
	// The worker commits by topic name: the broker must not offer the
	// versions that take topic ids instead.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.OffsetCommit), 9)
	versions.SetMaxKeyVersion(int16(kmsg.OffsetFetch), 9)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "clicks"), kfake.MaxVersions(versions),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "sink", "right"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	user := func(password string) clientauth.Settings {
		return clientauth.Settings{SASL: &clientauth.SASL{Mechanism: "SCRAM-SHA-256", Username: "sink", Password: password}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	opts, err := user("right").Opts()
	if err != nil {
		t.Fatal(err)
	}
	producer, err := kgo.NewClient(append(opts, kgo.SeedBrokers(c.ListenAddrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, click(0, 0), click(1, 0)).FirstErr(); err != nil {
		t.Fatal(err)
	}

	root := t.TempDir()
	st, err := store.NewFile(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Brokers: c.ListenAddrs(), Group: "g", Topics: []string{"clicks"}, Schema: "click",
		IdleTimeout: 100 * time.Millisecond, SessionTimeout: 6 * time.Second, Security: user("wrong")}
	w, err := New(cfg, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err == nil || !strings.Contains(err.Error(), "cannot reach brokers") {
		t.Fatalf("Start with a wrong password: %v", err)
	}

	cfg.Security = user("right")
	if w, err = New(cfg, st, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil && len(landed(t, root)) == 0 {
		select {
		case <-w.Done():
			t.Fatalf("worker stopped: %v", w.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, rows := range landed(t, root) {
		ids = append(ids, rows...)
	}
	if strings.Join(ids, ",") != "e0,e1" {
		t.Errorf("landed %v, want e0,e1", ids)
	}
}
