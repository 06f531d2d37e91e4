package log

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"millrace/internal/recordbatch/batchtest"
)

// TestTieredRetentionWaitsForRemoteEnd: on a remote.storage.enable log,
// local retention deletes only segments wholly below RemoteEnd, by
// local.retention.ms and local.retention.bytes (-2: the total limits), and
// never the active segment; without tiering the same log deletes by the
// total limits as before (KIP-405's local/total split).
func TestTieredRetentionWaitsForRemoteEnd(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	old := now.Add(-3 * time.Hour).UnixMilli()
	recent := now.Add(-time.Minute).UnixMilli()
	cases := []struct {
		name           string
		tiered         bool
		retention      time.Duration
		localRetention time.Duration
		localBytes     int64
		retentionBytes int64
		remoteEnd      int64
		wantStart      int64
	}{
		{"untiered deletes by retention.ms", false, 2 * time.Hour, UseRetention, UseRetentionBytes, -1, 0, 3},
		{"tiered, nothing uploaded", true, 2 * time.Hour, time.Hour, UseRetentionBytes, -1, 0, 0},
		{"tiered, first segment uploaded", true, 2 * time.Hour, time.Hour, UseRetentionBytes, -1, 1, 1},
		{"tiered, two segments uploaded", true, 2 * time.Hour, time.Hour, UseRetentionBytes, -1, 2, 2},
		{"tiered, every closed segment uploaded", true, 2 * time.Hour, time.Hour, UseRetentionBytes, -1, 3, 3},
		{"tiered, local.retention.ms -2 uses retention.ms", true, 2 * time.Hour, UseRetention, UseRetentionBytes, -1, 3, 3},
		{"tiered, local.retention.ms keeps recent", true, -1, 4 * time.Hour, UseRetentionBytes, -1, 3, 0},
		{"tiered, local.retention.bytes", true, -1, 4 * time.Hour, 1, 1 << 20, 3, 3},
		{"tiered, local.retention.bytes -2 uses retention.bytes", true, -1, 4 * time.Hour, UseRetentionBytes, 1, 3, 3},
		{"tiered, local.retention.bytes waits for the upload", true, -1, 4 * time.Hour, 1, 1 << 20, 1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig()
			cfg.Retention = c.retention
			cfg.RetentionBytes = c.retentionBytes
			cfg.RemoteStorageEnable = c.tiered
			cfg.LocalRetention, cfg.LocalRetentionBytes = c.localRetention, c.localBytes
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			l := openTest(t, filepath.Join(t.TempDir(), "t-0"), cfg, options{now: func() time.Time { return now }})
			defer l.Close()
			// Segments [0], [1], [2] closed and an active one at 3 with an
			// old record: only the active segment's is recent enough to
			// keep without tiering.
			for _, ts := range []int64{old, old, old} {
				mustAppend(t, l, batchtest.Make(1, 100, ts, 0))
				if err := l.Roll(); err != nil {
					t.Fatal(err)
				}
			}
			mustAppend(t, l, batchtest.Make(1, 100, recent, 0))
			l.SetRemoteEnd(c.remoteEnd)
			if _, err := l.EnforceRetentionBelow(now, -1); err != nil {
				t.Fatal(err)
			}
			if got := l.StartOffset(); got != c.wantStart {
				t.Fatalf("start offset %d, want %d", got, c.wantStart)
			}
			if last := l.Segments()[len(l.Segments())-1]; last.BaseOffset != 3 || last.Size == 0 {
				t.Fatalf("the active segment went: %+v", l.Segments())
			}
		})
	}
}

// TestTieredTopicOnUntieredBroker: a broker with tiered storage off
// (remote.log.storage.system.enable=false) never learns a RemoteEnd, so a
// log whose topic keeps remote.storage.enable=true is retained as Kafka's
// UnifiedLog.isRemoteLogEnabled has it, untiered: by retention.ms, not
// local.retention.ms, with one warning however often retention runs.
func TestTieredTopicOnUntieredBroker(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	old := now.Add(-3 * time.Hour).UnixMilli()
	var logged lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := OpenManager(t.TempDir(), DefaultConfig(), logger, WithRemoteStorageSystem(false))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.opts.now = func() time.Time { return now }
	cfg := DefaultConfig()
	cfg.Retention, cfg.RemoteStorageEnable, cfg.LocalRetention = 2*time.Hour, true, time.Hour
	l, err := m.Create("t", 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Two closed segments older than retention.ms, and an active one.
	for range 2 {
		mustAppend(t, l, batchtest.Make(1, 100, old, 0))
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := l.EnforceRetentionBelow(now, -1); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.StartOffset(); got != 2 {
		t.Fatalf("start offset %d, want 2: the expired segments stay on an untiered broker", got)
	}
	if n := strings.Count(logged.String(), "remote.log.storage.system.enable=false"); n != 1 {
		t.Fatalf("warned %d times, want once:\n%s", n, logged.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSetRemoteEndOnlyMovesForward: a stale report cannot lower it.
func TestSetRemoteEndOnlyMovesForward(t *testing.T) {
	t.Parallel()
	l := openTest(t, filepath.Join(t.TempDir(), "t-0"), DefaultConfig(), options{})
	defer l.Close()
	l.SetRemoteEnd(10)
	l.SetRemoteEnd(5)
	if got := l.RemoteEnd(); got != 10 {
		t.Fatalf("RemoteEnd %d, want 10", got)
	}
}

// TestRemoteStorageConfigRules: Kafka's LogConfig refuses tiering a
// compacted topic, and local limits beyond the total ones.
func TestRemoteStorageConfigRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		set     map[string]string
		wantErr string
	}{
		{"defaults", map[string]string{"remote.storage.enable": "true"}, ""},
		{"compacted", map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact"}, "compacted"},
		{"compact,delete", map[string]string{"remote.storage.enable": "true", "cleanup.policy": "compact,delete"}, "compacted"},
		{"compacted without tiering", map[string]string{"remote.storage.enable": "false", "cleanup.policy": "compact"}, ""},
		{"local.retention.ms over retention.ms", map[string]string{"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "2000"}, "must not exceed retention.ms"},
		{"local.retention.ms -1 under a finite retention.ms", map[string]string{"remote.storage.enable": "true", "local.retention.ms": "-1"}, "not allowed"},
		{"local.retention.ms -1 under unlimited retention.ms", map[string]string{"remote.storage.enable": "true", "retention.ms": "-1", "local.retention.ms": "-1"}, ""},
		{"local.retention.bytes over retention.bytes", map[string]string{"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "200"}, "must not exceed retention.bytes"},
		{"local.retention.bytes -1 under a finite retention.bytes", map[string]string{"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "-1"}, "not allowed"},
		{"local.retention.ms below -2", map[string]string{"local.retention.ms": "-3"}, "must be -2"},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		for name, v := range c.set {
			if err := cfg.Set(name, v); err != nil {
				t.Fatalf("%s: Set(%s, %s): %v", c.name, name, v, err)
			}
		}
		err := cfg.Validate()
		if (c.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", c.name, err, c.wantErr)
		}
	}
	if got := DefaultConfig().Values()["local.retention.ms"]; got != "-2" {
		t.Errorf("local.retention.ms default prints %q, want -2", got)
	}
}
