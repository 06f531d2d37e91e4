package appliance

import (
	"context"
	"fmt"
	"net"

	"millrace/agents/syslog"
	"millrace/audit"
)

// DefaultSyslogListen is where `millrace up` receives syslog over UDP and
// TCP when the syslog section names no address: loopback, on the
// unprivileged port rsyslog's docs use for tests (514 needs root).
const DefaultSyslogListen = "127.0.0.1:5514"

// SyslogConfig is the appliance's syslog receiver (agents/syslog): on by
// default, receiving UDP and TCP on DefaultSyslogListen into the topic
// "syslog".
type SyslogConfig struct {
	// Enabled turns the receiver on. Default true; false turns it off.
	Enabled *bool `yaml:"enabled"`
	// Inline: udp, tcp, tls, tls_cert, topic, max_message_bytes and the
	// rest of syslog.Config. When none of udp, tcp and tls is set, udp
	// and tcp are DefaultSyslogListen; setting any of them replaces both.
	syslog.Config `yaml:",inline"`
}

// On reports whether the receiver runs.
func (c SyslogConfig) On() bool { return c.Enabled == nil || *c.Enabled }

// withDefaults fills the addresses and the receiver's own defaults.
func (c SyslogConfig) withDefaults() SyslogConfig {
	if !c.On() {
		return c
	}
	if c.UDP == "" && c.TCP == "" && c.TLS == "" {
		c.UDP, c.TCP = DefaultSyslogListen, DefaultSyslogListen
	}
	c.Config = c.Config.WithDefaults()
	return c
}

// validate reports the receiver's configuration problems when it is on.
func (c SyslogConfig) validate() error {
	if !c.On() {
		return nil
	}
	return c.Config.Validate()
}

// startSyslog starts the syslog receiver on the shared producer, with its
// audit counter when the audit is on.
func (a *Appliance) startSyslog(ctx context.Context) error {
	if !a.cfg.Syslog.On() {
		return nil
	}
	s, err := syslog.New(a.cfg.Syslog.Config, a.shipper, a.registry, a.logger)
	if err != nil {
		return err
	}
	if a.cfg.Audit.On() {
		c, err := a.startAudit(audit.RoleSyslog, a.syslogInstance(), false, 0, a.shipper)
		if err != nil {
			return err
		}
		s.SetAudit(c)
	}
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("%w (the syslog section of the appliance file sets the addresses: udp, tcp, tls; enabled: false turns the receiver off)", err)
	}
	a.syslog = s
	return nil
}

// syslogInstance is the receiver's audit instance: audit.instance, or the
// host name and the first address it listens on.
func (a *Appliance) syslogInstance() string {
	if a.cfg.Audit.Instance != "" {
		return a.cfg.Audit.Instance
	}
	c := a.cfg.Syslog
	for _, addr := range []string{c.UDP, c.TCP, c.TLS} {
		if addr != "" {
			return audit.HostInstance(addr)
		}
	}
	return audit.HostInstance(DefaultSyslogListen)
}

// shutdownSyslog stops receiving and waits until the queued messages were
// handed to the producer.
func (a *Appliance) shutdownSyslog(ctx context.Context) error {
	if a.syslog == nil {
		return nil
	}
	return a.syslog.Shutdown(ctx)
}

// SyslogAddrs are the syslog receiver's addresses (nil when off or not
// listening on that transport).
type SyslogAddrs struct{ UDP, TCP, TLS net.Addr }

// SyslogAddrs reports where the syslog receiver listens; ok is false when
// it is off.
func (a *Appliance) SyslogAddrs() (addrs SyslogAddrs, ok bool) {
	if a.syslog == nil {
		return SyslogAddrs{}, false
	}
	return SyslogAddrs{UDP: a.syslog.UDPAddr(), TCP: a.syslog.TCPAddr(), TLS: a.syslog.TLSAddr()}, true
}

// syslogTopic is the receiver's topic, or "" when it is off.
func (c Config) syslogTopic() string {
	if !c.Syslog.On() {
		return ""
	}
	return c.Syslog.WithDefaults().Topic
}
