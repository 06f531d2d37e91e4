package appliance

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/twmb/franz-go/pkg/kfake"

	"millrace/agents/beacon"
	"millrace/agents/promwrite"
	"millrace/internal/httpserver"
)

// TestRemoteWriteNeedsHTTPAuth: under `millrace up` with http.auth,
// remote write needs the credentials (basic auth, as remote_write's
// basic_auth sends them) while /v1/metrics stays public; the route is on
// with the beacon by default.
func TestRemoteWriteNeedsHTTPAuth(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "clicks", "clicks.dlq", "ops.metrics", "ops.metrics.dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // after the appliance shuts down (startAppliance)
	dir := t.TempDir()
	basic := filepath.Join(dir, "users")
	if err := os.WriteFile(basic, []byte("prometheus:remote-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	off := false
	cfg := Config{
		Data:       dir,
		Brokers:    c.ListenAddrs(),
		HTTP:       HTTPConfig{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AuditInterval: -1, Auth: HTTPAuthConfig{AuthConfig: httpserver.AuthConfig{BasicFile: basic}}},
		Beacon:     &beacon.Config{},
		OpsMetrics: OpsMetricsConfig{Interval: -1},
		Syslog:     syslogOff(),
		OTLP:       otlpOnFreePorts,
	}
	cfg.Audit.Enabled = &off
	a, ctx := startAppliance(t, cfg, 30*time.Second)
	base := "http://" + a.HTTPAddr().String()
	// An empty WriteRequest: nothing to produce, answered 204 once past
	// the authentication.
	empty := snappy.Encode(nil, nil)
	write := func(user, password string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+promwrite.Path, bytes.NewReader(empty))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Encoding", "snappy")
		req.Header.Set("Content-Type", "application/x-protobuf")
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := write("", ""); code != http.StatusUnauthorized {
		t.Errorf("remote write without credentials: %d, want 401", code)
	}
	if code := write("prometheus", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("remote write with a wrong password: %d, want 401", code)
	}
	if code := write("prometheus", "remote-secret"); code != http.StatusNoContent {
		t.Errorf("remote write with the credentials: %d, want 204", code)
	}
	resp, err := http.Post(base+"/v1/metrics", "application/json", bytes.NewReader([]byte(`{"name":"up","kind":"gauge","value":1}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/v1/metrics without credentials: %d, want 200 (public)", resp.StatusCode)
	}
}

// TestRemoteWriteConfigFile: beacon.remote_write takes promwrite's settings
// inline beside enabled, and its topic is created with the beacon's.
func TestRemoteWriteConfigFile(t *testing.T) {
	t.Parallel()
	c := decodeConfig(t, `
beacon:
  metrics_topic: m
  remote_write:
    topic: prom
    max_in_flight: 8
    max_samples: 5000
`)
	rw := c.Beacon.WithDefaults().RemoteWrite
	if !rw.On() || rw.Topic != "prom" || rw.MaxInFlight != 8 || rw.MaxSamples != 5000 {
		t.Fatalf("remote_write %+v", rw)
	}
	has := func(c Config, name string) bool {
		for _, tc := range c.withDefaults().usedTopics() {
			if tc.Name == name {
				return true
			}
		}
		return false
	}
	if !has(c, "prom") || !has(c, "m") {
		t.Fatalf("used topics %v, want prom and m", c.withDefaults().usedTopics())
	}
	off := decodeConfig(t, "beacon:\n  remote_write:\n    enabled: false\n    topic: prom\n")
	if off.Beacon.RemoteWrite.On() || has(off, "prom") {
		t.Fatal("a disabled remote write still on, or its topic created")
	}
}
