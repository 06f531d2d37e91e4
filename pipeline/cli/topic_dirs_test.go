package cli

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/broker"
	"millrace/internal/waitfor"
)

// TestTopicDescribeShowsTheRemotePart: on a broker with tiered storage,
// `topic describe` of a tiered topic shows each partition's local start
// and size beside its remote start, end and size (what DescribeLogDirs'
// tagged field carries); an untiered topic keeps the plain table.
func TestTopicDescribeShowsTheRemotePart(t *testing.T) {
	clearClientEnv(t)
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Kafka.Listener = "127.0.0.1:0"
	cfg.RetentionCheckInterval = 20 * time.Millisecond
	cfg.Tier.Enable, cfg.Tier.URL = true, "file://"+t.TempDir()
	cfg.Tier.TaskInterval = 20 * time.Millisecond
	b, err := broker.Open(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	addr := b.Addr().String()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("tiered"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	one := func(s string) *string { return &s }
	for topic, configs := range map[string]map[string]*string{
		"tiered": {"remote.storage.enable": one("true"), "segment.bytes": one("400"), "local.retention.bytes": one("1")},
		"plain":  nil,
	} {
		if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, configs, topic); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
	}
	for i := range 30 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strings.Repeat("x", 50+i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// A row: partition 0, leader 0, its epoch, replicas and ISR 0, the
	// earliest and latest offsets, then the local start and size and the
	// remote start, end and size: the remote part starts at 0 and ends
	// where the local part starts.
	row := regexp.MustCompile(`(?m)^0\s+0\s+\d+\s+0\s+0\s+\d+\s+30\s+(\d+)\s+\S+\s+0\s+(\d+)\s+\S+$`)
	var out string
	waitfor.Until(t, 20*time.Second, "the remote part described", func() bool {
		code, stdout, stderr := runMain("topic", "describe", "-b", addr, "tiered")
		if code != 0 {
			t.Fatalf("topic describe: exit %d: %s", code, stderr)
		}
		out = stdout
		m := row.FindStringSubmatch(out)
		return m != nil && m[1] == m[2] && m[1] != "0"
	})
	if !strings.Contains(out, "LOCAL START") || !strings.Contains(out, "REMOTE SIZE") {
		t.Fatalf("header:\n%s", out)
	}
	code, plain, stderr := runMain("topic", "describe", "-b", addr, "plain")
	if code != 0 || strings.Contains(plain, "REMOTE") || !strings.Contains(plain, "SIZE") {
		t.Fatalf("untiered topic (exit %d, %s):\n%s", code, stderr, plain)
	}
}
