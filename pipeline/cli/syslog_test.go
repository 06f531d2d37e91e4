package cli

import (
	"net"
	"testing"

	"millrace/agents/syslog"
	"millrace/pipeline/appliance"
)

// Flags override the file's addresses; with none from either, the
// receiver listens where millrace up's does.
func TestSyslogFlagsOverTheFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		file          syslog.Config
		flags         syslogOptions
		udp, tcp, tls string
		topic         string
	}{
		{"defaults", syslog.Config{}, syslogOptions{}, appliance.DefaultSyslogListen, appliance.DefaultSyslogListen, "", ""},
		{"file", syslog.Config{TCP: ":1514", Topic: "net"}, syslogOptions{}, "", ":1514", "", "net"},
		{"flags win", syslog.Config{TCP: ":1514", Topic: "net"}, syslogOptions{tcp: ":2514", tls: ":6514", tlsCert: "c.pem", topic: "t"}, "", ":2514", ":6514", "t"},
	} {
		c := tc.file
		tc.flags.apply(&c)
		if c.UDP != tc.udp || c.TCP != tc.tcp || c.TLS != tc.tls || c.Topic != tc.topic {
			t.Errorf("%s: %+v, want udp %q tcp %q tls %q topic %q", tc.name, c, tc.udp, tc.tcp, tc.tls, tc.topic)
		}
		if tc.flags.tlsCert != "" && c.TLSCert != tc.flags.tlsCert {
			t.Errorf("%s: tls_cert %q, want %q", tc.name, c.TLSCert, tc.flags.tlsCert)
		}
	}
}

func TestSyslogEndpoints(t *testing.T) {
	t.Parallel()
	udp := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5514}
	tcp := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5514}
	if got, want := syslogEndpoints(udp, tcp, nil), "udp://127.0.0.1:5514, tcp://127.0.0.1:5514"; got != want {
		t.Errorf("endpoints %q, want %q", got, want)
	}
}
