package cli

import (
	"context"
	"fmt"
	"time"

	"millrace/pipeline/appliance"
)

func init() {
	register("up", "up [--config millrace.yaml]   run the whole appliance on this machine", runUp)
}

// runUp runs the appliance until SIGINT/SIGTERM, then shuts it down in
// order: intake stops, agents flush, sinks publish, the broker stops last.
func runUp(ctx context.Context, e env, args []string) error {
	f := newFlags("up")
	configFile := f.String("config", "", "appliance YAML (default: built-in defaults, embedded broker only)")
	shutdownTimeout := f.Duration("shutdown-timeout", 60*time.Second, "how long a clean shutdown may take")
	logLevel := f.String("log-level", "info", "debug, info, warn or error")
	if _, err := f.parse(args, 0); err != nil {
		return err
	}
	logger, err := newLogger(e, *logLevel)
	if err != nil {
		return err
	}
	var cfg appliance.Config
	if *configFile != "" {
		if err := loadYAML(*configFile, &cfg); err != nil {
			return err
		}
	}
	a, err := appliance.Start(ctx, cfg, logger)
	if err != nil {
		return err
	}
	printWhere(e, a, cfg)
	select {
	case <-ctx.Done():
	case err := <-a.BrokerDone():
		logger.Error("the broker stopped; shutting down", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
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
	}
	fmt.Fprintf(e.stdout, "  console                  %s/console\n", web)
	fmt.Fprintf(e.stdout, "  prometheus metrics       %s://%s/metrics\n", a.HTTPScheme(), a.MetricsAddr())
	if login := a.ConsoleLoginURL(); login != "" {
		fmt.Fprintf(e.stdout, "  console login            %s\n", login)
		fmt.Fprintf(e.stdout, "  http token (bearer)      %s\n", a.TokenFile())
	}
	for _, s := range a.Sinks() {
		fmt.Fprintf(e.stdout, "  lake (%s)%*s%s\n", s.Name, max(1, 17-len(s.Name)), "", s.Out)
	}
	fmt.Fprintln(e.stdout, "Stop with Ctrl-C; acknowledged events are never lost.")
}
