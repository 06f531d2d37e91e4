package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"millrace/broker"
	"millrace/internal/gcfloor"
)

func init() {
	addCommand("", brokerCommand)
}

func brokerCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use: "broker --listen HOST:PORT --data DIR [--id N] [--metrics-listen ADDR] [--zookeeper HOST:PORT[,...][/chroot]] " +
			"[--config FILE] [--set name=value]...",
		Short:       "run a broker: embedded coordination, or one broker of a ZooKeeper cluster",
		Args:        exactArgs(0),
		Annotations: noClient,
	}
	f := cmd.Flags()
	var o brokerOptions
	f.StringVar(&o.listen, "listen", "127.0.0.1:9092", "address to serve the Kafka protocol on: one PLAINTEXT listener, short for --set listeners=PLAINTEXT://HOST:PORT (a listeners setting given instead names several, with their security protocols)")
	f.StringVar(&o.data, "data", "", "data directory (partition logs and coordination state)")
	f.IntVar(&o.id, "id", 1, "broker id")
	f.StringVar(&o.zookeeper, "zookeeper", "", "ZooKeeper connect string host:port[,host:port...][/chroot]; runs the broker as part of a replicated cluster (zookeeper.connect)")
	f.StringVarP(&o.configFile, "config", "c", "", "Kafka server.properties-style file of broker settings")
	o.sets = keyValues{}
	f.Var(o.sets, "set", "broker setting `name=value` by its Kafka name, after --config (repeatable)")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.metricsAddr, "metrics-listen", "", "serve Prometheus /metrics on this address")
	// Fault injection for the e2e tests, hidden from the help: writes not
	// yet fsynced stay in the process's memory, so a SIGKILL loses what a
	// power cut would (broker.Config.HoldUnsyncedWrites).
	f.BoolVar(&o.holdUnsynced, "hold-unsynced-writes", false, "")
	if err := f.MarkHidden("hold-unsynced-writes"); err != nil {
		panic(err) // a flag defined just above
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runBroker(cmd.Context(), e, o, cmd.Flags().Changed) }
	return cmd
}

// brokerOptions are the flags of broker.
type brokerOptions struct {
	listen, data, zookeeper, configFile, logLevel, metricsAddr string
	id                                                         int
	sets                                                       keyValues
	holdUnsynced                                               bool
}

// runBroker runs a broker until SIGINT/SIGTERM: with embedded coordination,
// or with --zookeeper as one broker of a replicated cluster.
func runBroker(ctx context.Context, e *env, o brokerOptions, given func(flag string) bool) error {
	logger, err := newLogger(*e, o.logLevel)
	if err != nil {
		return err
	}
	// Request garbage on a small live heap would run the collector
	// several times a second; see gcfloor.
	defer gcfloor.Keep(gcfloor.DefaultFloor)()

	cfg := broker.DefaultConfig()
	if o.configFile != "" {
		file, err := os.Open(o.configFile)
		if err != nil {
			return err
		}
		err = cfg.LoadProperties(file)
		file.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", o.configFile, err)
		}
	}
	for name, value := range o.sets {
		if err := cfg.Set(name, value); err != nil {
			return err
		}
	}
	// Flags given explicitly win over the file, as users expect.
	if given("listen") || cfg.Kafka.Listener == broker.DefaultConfig().Kafka.Listener {
		cfg.Kafka.Listener = o.listen
	}
	if given("data") || cfg.DataDir == "" {
		cfg.DataDir = o.data
	}
	if given("id") || cfg.Kafka.BrokerID == 0 {
		cfg.Kafka.BrokerID = int32(o.id)
	}
	if given("zookeeper") {
		cfg.ZooKeeper = o.zookeeper
	}
	if cfg.DataDir == "" {
		return usageError("--data DIR is required")
	}
	cfg.HoldUnsyncedWrites = o.holdUnsynced
	reg := newRegistry()
	cfg.Metrics = reg
	waitMetrics, err := serveMetrics(ctx, o.metricsAddr, reg, logger)
	if err != nil {
		return err
	}
	defer waitMetrics()
	b, err := broker.Open(cfg, logger)
	if err != nil {
		return err
	}
	coordination := "embedded coordination"
	if cfg.ZooKeeper != "" {
		coordination = "ZooKeeper " + cfg.ZooKeeper
	}
	fmt.Fprintf(e.stderr, "millrace broker %s serving on %s (id %s, data %s, %s)\n", Version, b.Addr(), strconv.Itoa(int(cfg.Kafka.BrokerID)), cfg.DataDir, coordination)
	return b.Run(ctx)
}
