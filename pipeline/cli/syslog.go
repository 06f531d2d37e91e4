package cli

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"millrace/agents/ship"
	"millrace/agents/syslog"
	"millrace/audit"
	"millrace/pipeline/appliance"
)

func init() {
	addCommand("", syslogCommand)
}

func syslogCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "syslog [--udp ADDR] [--tcp ADDR] [--tls-listen ADDR --tls-listen-cert FILE] [--topic T] [--config syslog.yaml]",
		Short: "receive syslog over UDP, TCP and TLS and ship a JSON record per message",
		Long: "Receive syslog over UDP, TCP and TLS (RFC 5424 and 3164 messages; octet-counted or newline framing, " +
			"RFC 6587; TLS, RFC 5425) and ship a JSON record per message. With no address given it listens on UDP and " +
			"TCP " + appliance.DefaultSyslogListen + ", as millrace up does. A message that does not parse is shipped " +
			"with its raw text and a parse_error; UDP datagrams the producer cannot keep up with are dropped and counted " +
			"in millrace_syslog_dropped_total (see --metrics-listen). --tls and the other client flags are the " +
			"connection to the brokers; --tls-listen* are the receiver's own.",
		Args: exactArgs(0),
	}
	f := cmd.Flags()
	var o syslogOptions
	f.StringVar(&o.udp, "udp", "", "receive datagrams on this address (syslog.udp)")
	f.StringVar(&o.tcp, "tcp", "", "accept plain TCP connections on this address (syslog.tcp)")
	f.StringVar(&o.tls, "tls-listen", "", "accept TLS connections on this address (syslog.tls; needs --tls-listen-cert)")
	f.StringVar(&o.tlsCert, "tls-listen-cert", "", "PEM `file` of the receiver's certificate chain, and its key unless --tls-listen-key (syslog.tls_cert)")
	f.StringVar(&o.tlsKey, "tls-listen-key", "", "PEM `file` of the receiver certificate's key (syslog.tls_key)")
	f.StringVarP(&o.topic, "topic", "t", "", "topic for the records (default syslog)")
	f.StringVar(&o.metricsAddr, "metrics-listen", "", "serve Prometheus /metrics, and /readyz (503 while records cannot ship), on this address")
	addAgentFlags(f, &o.agent, "YAML file with ship:, syslog: and audit: sections (flags override)", "how long shutdown may wait for acknowledgements")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runSyslog(cmd.Context(), e, o) }
	return cmd
}

// syslogOptions are the flags of syslog.
type syslogOptions struct {
	udp, tcp, tls, tlsCert, tlsKey, topic, metricsAddr string
	agent                                              agentOptions
}

// syslogFile is the YAML layout of `millrace syslog --config`.
type syslogFile struct {
	// The ship: and audit: sections.
	agentSections `yaml:",inline"`
	// Syslog is the receiver: addresses, TLS, topic, limits.
	Syslog syslog.Config `yaml:"syslog"`
}

// apply sets the flags given over the file's settings, and the default
// addresses when neither names one.
func (o syslogOptions) apply(c *syslog.Config) {
	override([]flagOverride{
		{o.udp, &c.UDP}, {o.tcp, &c.TCP}, {o.tls, &c.TLS}, {o.tlsCert, &c.TLSCert}, {o.tlsKey, &c.TLSKey}, {o.topic, &c.Topic},
	})
	if c.UDP == "" && c.TCP == "" && c.TLS == "" {
		c.UDP, c.TCP = appliance.DefaultSyslogListen, appliance.DefaultSyslogListen
	}
}

// runSyslog receives syslog until SIGINT/SIGTERM, then stops listening,
// hands the messages read to the producer and waits for the broker's
// acknowledgements.
func runSyslog(ctx context.Context, e *env, o syslogOptions) error {
	var cfg syslogFile
	p, err := newAgentProc(e, "syslog", o.agent, &cfg)
	if err != nil {
		return err
	}
	o.apply(&cfg.Syslog)
	server, err := startProducer(ctx, p, cfg.Ship, o.metricsAddr, func(s *ship.Shipper) (*syslog.Server, error) {
		return syslog.New(cfg.Syslog, s, p.reg, p.logger)
	})
	if err != nil {
		return err
	}
	listen := firstNonEmpty(cfg.Syslog.UDP, cfg.Syslog.TCP, cfg.Syslog.TLS)
	counter, err := p.startCounter(ctx, audit.RoleSyslog, p.instance(listen), false, 0)
	if err != nil {
		return err
	}
	if counter != nil {
		server.SetAudit(counter)
	}
	if err := server.Start(ctx); err != nil {
		return p.abort(ctx, err)
	}
	fmt.Fprintf(e.stderr, "millrace syslog receiving on %s into topic %s\n",
		syslogEndpoints(server.UDPAddr(), server.TCPAddr(), server.TLSAddr()), cfg.Syslog.WithDefaults().Topic)
	if o.metricsAddr != "" {
		fmt.Fprintf(e.stderr, "prometheus metrics on http://%s/metrics\n", o.metricsAddr)
	}
	return p.run(ctx, listen, "syslog", server.Shutdown)
}

// syslogEndpoints names the receiver's listeners as "udp://ADDR,
// tcp://ADDR, tls://ADDR", leaving out those that are nil.
func syslogEndpoints(udp, tcp, tls net.Addr) string {
	var out []string
	for _, l := range []struct {
		scheme string
		addr   net.Addr
	}{{"udp", udp}, {"tcp", tcp}, {"tls", tls}} {
		if l.addr != nil {
			out = append(out, l.scheme+"://"+l.addr.String())
		}
	}
	return strings.Join(out, ", ")
}

// printSyslog is up's banner line for the syslog receiver, when it is on.
func printSyslog(e env, a *appliance.Appliance) {
	if addrs, ok := a.SyslogAddrs(); ok {
		fmt.Fprintf(e.stdout, "  syslog                   %s\n", syslogEndpoints(addrs.UDP, addrs.TCP, addrs.TLS))
	}
}

// firstNonEmpty is the first of ss that is not "".
func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
