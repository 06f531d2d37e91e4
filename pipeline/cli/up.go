package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"millrace/agents/promwrite"
	"millrace/internal/gcfloor"
	"millrace/pipeline/appliance"
)

func init() {
	addCommand("", func(e *env) *cobra.Command {
		cmd := &cobra.Command{
			Use:   "up [--config millrace.yaml]",
			Short: "run the whole appliance on this machine",
			Long: "Run the whole appliance on this machine. The client flags apply to its parts' clients: " +
				"-b runs against those brokers instead of an embedded one (as brokers: does), and --tls*/--sasl-* " +
				"replace the file's top-level tls:/sasl: (the environment only fills what the file leaves out).",
			Args: exactArgs(0),
		}
		f := cmd.Flags()
		var o upOptions
		f.StringVarP(&o.configFile, "config", "c", "", "appliance YAML (default: built-in defaults, embedded broker only)")
		f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 60*time.Second, "how long a clean shutdown may take")
		f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
		cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runUp(cmd.Context(), e, o) }
		return cmd
	})
}

// upOptions are the flags of up.
type upOptions struct {
	configFile, logLevel string
	shutdownTimeout      time.Duration
}

// runUp runs the appliance until SIGINT/SIGTERM, then shuts it down in
// order: intake stops, agents flush, sinks publish, the broker stops last.
func runUp(ctx context.Context, e *env, o upOptions) error {
	logger, err := newLogger(*e, o.logLevel)
	if err != nil {
		return err
	}
	// Request garbage on a small live heap would run the collector
	// several times a second; see gcfloor.
	defer gcfloor.Keep(gcfloor.DefaultFloor)()
	var cfg appliance.Config
	if o.configFile != "" {
		if err := loadYAML(o.configFile, &cfg); err != nil {
			return err
		}
	}
	if e.client.brokersGiven() {
		cfg.Brokers = e.client.seeds()
	}
	if err := e.client.applyTo(&cfg.Security); err != nil {
		return err
	}
	a, err := appliance.Start(ctx, cfg, logger)
	if err != nil {
		return err
	}
	printWhere(*e, a, cfg)
	select {
	case <-ctx.Done():
	case err := <-a.BrokerDone():
		logger.Error("the broker stopped; shutting down", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	return a.Shutdown(sctx)
}

// printWhere tells a new user where everything is.
func printWhere(e env, a *appliance.Appliance, cfg appliance.Config) {
	web := a.HTTPScheme() + "://" + a.HTTPAddr().String()
	fmt.Fprintf(e.stdout, "millrace %s is up\n", Version)
	fmt.Fprintf(e.stdout, "  broker (Kafka protocol)  %v\n", a.Brokers())
	fmt.Fprintf(e.stdout, "  demo page                %s/\n", web)
	if cfg.Beacon != nil {
		fmt.Fprintf(e.stdout, "  beacon                   %s/beacon.js, POST %s/v1/events, %s/b.gif\n", web, web, web)
		fmt.Fprintf(e.stdout, "  metrics intake           POST %s/v1/metrics\n", web)
		if cfg.Beacon.RemoteWrite.On() {
			fmt.Fprintf(e.stdout, "  prometheus remote write  %s%s\n", web, promwrite.Path)
		}
	}
	printSyslog(e, a)
	printOTLP(e, a)
	fmt.Fprintf(e.stdout, "  console                  %s/console\n", web)
	fmt.Fprintf(e.stdout, "  prometheus metrics       %s://%s/metrics\n", a.HTTPScheme(), a.MetricsAddr())
	if addr := a.SchemaRegistryAddr(); addr != nil {
		fmt.Fprintf(e.stdout, "  schema registry          %s://%s\n", a.SchemaRegistryScheme(), addr)
	}
	if login := a.ConsoleLoginURL(); login != "" {
		// The login URL holds the token. A terminal shows it to the
		// operator once; anything else (the journal, a container's or
		// a file's log) would keep the secret, so it gets where the
		// token is instead.
		if !isTerminal(e.stdout) {
			login = fmt.Sprintf("%s/console?token=TOKEN (TOKEN is in %s; the full URL is printed only to a terminal)", web, a.TokenFile())
		}
		fmt.Fprintf(e.stdout, "  console login            %s\n", login)
		fmt.Fprintf(e.stdout, "  http token (bearer)      %s\n", a.TokenFile())
	}
	for _, s := range a.Sinks() {
		where := s.Out
		if len(s.Tables) > 0 {
			// The tables, and the catalog `lake` and warehouses find them by.
			where += fmt.Sprintf("  (Iceberg %s; catalog %s)", strings.Join(s.Tables, ", "), s.Catalog)
		}
		fmt.Fprintf(e.stdout, "  lake (%s)%*s%s\n", s.Name, max(1, 17-len(s.Name)), "", where)
	}
	if sc, ok := a.SecureClient(); ok {
		printSecureClient(e, sc)
	} else {
		printTry(e, a.Brokers())
	}
	fmt.Fprintln(e.stdout, "Stop with Ctrl-C; acknowledged events are never lost.")
}

// printTry prints a client command to run next, naming the binary as this
// shell finds it (make run starts ./bin/millrace, not on PATH).
func printTry(e env, brokers []string) {
	fmt.Fprintf(e.stdout, "  watch it                 %s top -b %s\n", e.self, strings.Join(brokers, ","))
}

// printSecureClient prints what a client needs to connect as admin under
// security: on: the paths of the CA and of the password, never the
// password itself.
func printSecureClient(e env, sc appliance.SecureClient) {
	ca, pw := shellQuote(sc.CAFile), shellQuote(sc.PasswordFile)
	fmt.Fprintf(e.stdout, "  security                 SASL_SSL, %s, ACLs on (made now: %v)\n", sc.Mechanism, sc.Created)
	fmt.Fprintf(e.stdout, "  CA certificate           %s\n", sc.CAFile)
	fmt.Fprintf(e.stdout, "  admin user               %s, password in %s\n", sc.Username, sc.PasswordFile)
	fmt.Fprintf(e.stdout, "  kcat                     kcat -b %s -X security.protocol=SASL_SSL -X sasl.mechanisms=%s -X sasl.username=%s -X sasl.password=\"$(cat %s)\" -X ssl.ca.location=%s -L\n",
		sc.Bootstrap, sc.Mechanism, sc.Username, pw, ca)
	fmt.Fprintf(e.stdout, "  millrace CLI             %s topic list -b %s --tls-ca %s --sasl-mechanism %s --sasl-username %s --sasl-password-file %s\n",
		e.self, sc.Bootstrap, ca, sc.Mechanism, sc.Username, pw)
	fmt.Fprintf(e.stdout, "                           (or MILLRACE_SASL_PASSWORD=\"$(cat %s)\" instead of --sasl-password-file)\n", pw)
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe
// characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@,+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isTerminal reports whether w is a terminal (a character device), where
// a secret printed once is seen and not kept.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
