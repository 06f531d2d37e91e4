package appliance

import (
	"slices"
	"strings"
	"testing"

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
