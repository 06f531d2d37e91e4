package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/syslog"
)

// syslogOff is the syslog section of tests that start appliances in
// parallel: the default port would be taken by the first.
func syslogOff() SyslogConfig {
	off := false
	return SyslogConfig{Enabled: &off}
}

// The receiver is on by default, on UDP and TCP 127.0.0.1:5514, and its
// topic is created with the embedded broker; enabled: false removes both;
// an address of one's own replaces both defaults.
func TestSyslogDefaults(t *testing.T) {
	t.Parallel()
	off := false
	for _, tc := range []struct {
		name          string
		in            SyslogConfig
		udp, tcp, tls string
		topic         string
	}{
		{"default", SyslogConfig{}, DefaultSyslogListen, DefaultSyslogListen, "", "syslog"},
		{"off", SyslogConfig{Enabled: &off}, "", "", "", ""},
		{"tls only", SyslogConfig{Config: syslog.Config{TLS: ":6514", TLSCert: "c.pem"}}, "", "", ":6514", "syslog"},
		{"own topic", SyslogConfig{Config: syslog.Config{TCP: ":1514", Topic: "net.logs"}}, "", ":1514", "", "net.logs"},
	} {
		c := Config{Syslog: tc.in}.withDefaults()
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		s := c.Syslog
		if s.UDP != tc.udp || s.TCP != tc.tcp || s.TLS != tc.tls {
			t.Errorf("%s: udp %q tcp %q tls %q, want %q %q %q", tc.name, s.UDP, s.TCP, s.TLS, tc.udp, tc.tcp, tc.tls)
		}
		var used []string
		for _, u := range c.usedTopics() {
			used = append(used, u.Name)
		}
		if got := slices.Contains(used, tc.topic); tc.topic != "" && !got {
			t.Errorf("%s: topics created %v, want %s among them", tc.name, used, tc.topic)
		}
		if tc.topic == "" && slices.Contains(used, syslog.DefaultTopic) {
			t.Errorf("%s: topics created %v, want no %s", tc.name, used, syslog.DefaultTopic)
		}
	}
}

// The receiver's configuration errors are the appliance's; off, its
// settings are not checked.
func TestSyslogValidated(t *testing.T) {
	t.Parallel()
	bad := Config{Syslog: SyslogConfig{Config: syslog.Config{TLS: ":6514"}}}.withDefaults()
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "tls_cert") {
		t.Errorf("tls without tls_cert: %v, want an error naming tls_cert", err)
	}
	off := syslogOff()
	off.TLS = ":6514"
	if err := (Config{Syslog: off}).withDefaults().Validate(); err != nil {
		t.Errorf("off: %v", err)
	}
}

// Under security: on the receiver produces as the beacon's user, whose
// ACLs now cover the syslog topic: a message sent over TCP lands, and
// admin reads it back.
func TestSyslogUnderSecurity(t *testing.T) {
	t.Parallel()
	cfg := Config{
		Data:           t.TempDir(),
		Secure:         true,
		Broker:         BrokerConfig{Listen: "127.0.0.1:0"},
		SchemaRegistry: SchemaRegistryConfig{Enabled: new(bool)},
		HTTP:           HTTPConfig{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AuditInterval: -1},
		Syslog:         SyslogConfig{Config: syslog.Config{TCP: "127.0.0.1:0"}},
		OTLP:           otlpOnFreePorts,
		OpsMetrics:     OpsMetricsConfig{Interval: -1},
	}
	a, ctx := startAppliance(t, cfg, 60*time.Second)
	addrs, ok := a.SyslogAddrs()
	if !ok || addrs.TCP == nil || addrs.UDP != nil || addrs.TLS != nil {
		t.Fatalf("syslog listening on %+v (on: %v), want TCP only", addrs, ok)
	}
	conn, err := net.Dial("tcp", addrs.TCP.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "<13>1 - web1 nginx - - - secured\n"); err != nil {
		t.Fatal(err)
	}
	opts, err := a.secure.clientSettings(AdminUser).Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(a.Brokers()...), kgo.ConsumeTopics(syslog.DefaultTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the message did not land in the syslog topic")
		}
		var got []syslog.Record
		fetches.EachRecord(func(r *kgo.Record) {
			var rec syslog.Record
			if err := json.Unmarshal(r.Value, &rec); err != nil {
				t.Errorf("record %q: %v", r.Value, err)
			}
			got = append(got, rec)
		})
		if len(got) > 0 {
			if len(got) != 1 || got[0].Host != "web1" || got[0].App != "nginx" || got[0].Message != "secured" {
				t.Errorf("records %+v, want the one message from web1/nginx", got)
			}
			return
		}
	}
}

// A taken port fails the start with the sentence that says where the
// addresses are set.
func TestSyslogPortTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := Config{
		Data:           t.TempDir(),
		Broker:         BrokerConfig{Listen: "127.0.0.1:0"},
		SchemaRegistry: SchemaRegistryConfig{Enabled: new(bool)},
		HTTP:           HTTPConfig{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AuditInterval: -1},
		Syslog:         SyslogConfig{Config: syslog.Config{TCP: taken.Addr().String()}},
		OTLP:           otlpOnFreePorts,
		OpsMetrics:     OpsMetricsConfig{Interval: -1},
	}
	_, err = Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "listening for TCP") || !strings.Contains(err.Error(), "enabled: false") {
		t.Errorf("start with the syslog port taken: %v, want the listen error and where to set the address", err)
	}
}
