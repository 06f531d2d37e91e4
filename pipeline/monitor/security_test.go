package monitor

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
	"millrace/internal/clientauth"
	"millrace/store"
)

func TestValidateSecurity(t *testing.T) {
	bad := clientauth.Settings{SASL: &clientauth.SASL{Mechanism: "PLAIN", Username: "console"}}
	err := Config{Brokers: []string{"b:9093"}, Security: bad}.withDefaults().Validate()
	if err == nil || !strings.Contains(err.Error(), "monitor: sasl: set exactly one of password and password_file") {
		t.Errorf("Config.Validate: %v", err)
	}
	lake, err := store.NewFile(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = AuditConfig{Brokers: []string{"b:9093"}, Lakes: []AuditLake{{Name: "l", Store: lake}}, Security: bad}.withDefaults().Validate()
	if err == nil || !strings.Contains(err.Error(), "monitor: audit: sasl: set exactly one") {
		t.Errorf("AuditConfig.Validate: %v", err)
	}
}

// TestCollectorAndAuditAuthenticate reads a cluster that requires SASL:
// the collector's cluster reads and metrics follower, and the auditor's
// read of the audit topic, all authenticate with the configured user.
func TestCollectorAndAuditAuthenticate(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events", DefaultMetricsTopic, audit.Topic),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "console", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	user := func(password string) clientauth.Settings {
		return clientauth.Settings{SASL: &clientauth.SASL{Mechanism: "SCRAM-SHA-256", Username: "console", Password: password}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts, err := user("pw").Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(c.ListenAddrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sample := &kgo.Record{Topic: DefaultMetricsTopic, Value: sampleJSON("millrace_lake_rows_total", "counter", 1,
		`{"sink":"clicks","topic":"clicks"}`, time.Now(), "h:up")}
	if err := cl.ProduceSync(ctx, sample).FirstErr(); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)

	wrong, err := New(Config{Brokers: c.ListenAddrs(), Security: user("wrong")}, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := wrong.Ping(ctx); err == nil {
		t.Error("the collector reached the cluster with a wrong password")
	}
	wrong.Shutdown(ctx)

	col, err := New(Config{Brokers: c.ListenAddrs(), Interval: 100 * time.Millisecond, Security: user("pw")}, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := col.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := col.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer col.Shutdown(context.Background())
	for {
		updated := col.Updated()
		s := col.Latest()
		if len(s.Topics) > 0 && len(s.Components) > 0 {
			break
		}
		select {
		case <-updated:
		case <-ctx.Done():
			t.Fatalf("no topics or no components read: %+v", s)
		}
	}

	lake, err := store.NewFile(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ac := AuditConfig{Brokers: c.ListenAddrs(), Lakes: []AuditLake{{Name: "l", Store: lake}}, Security: user("pw")}.withDefaults()
	if _, err := ac.runAudit(ctx, time.Now()); err != nil {
		t.Errorf("audit run: %v", err)
	}
	ac.Security = user("wrong")
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := ac.runAudit(short, time.Now()); err == nil {
		t.Error("the audit read the topic with a wrong password")
	}
}
