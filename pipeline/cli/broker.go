package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"millrace/broker"
)

func init() {
	register("broker", "broker --listen HOST:PORT --data DIR [--id N] [--metrics-listen ADDR] [--zookeeper HOST:PORT[,...][/chroot]] [--config FILE] [--set name=value]...", runBroker)
}

// runBroker runs a broker until SIGINT/SIGTERM: with embedded coordination,
// or with --zookeeper as one broker of a replicated cluster.
func runBroker(ctx context.Context, e env, args []string) error {
	f := newFlags("broker")
	listen := f.String("listen", "127.0.0.1:9092", "address to serve the Kafka protocol on")
	data := f.String("data", "", "data directory (partition logs and coordination state)")
	id := f.Int("id", 1, "broker id")
	zookeeper := f.String("zookeeper", "", "ZooKeeper connect string host:port[,host:port...][/chroot]; runs the broker as part of a replicated cluster (zookeeper.connect)")
	configFile := f.String("config", "", "Kafka server.properties-style file of broker settings")
	sets := keyValues{}
	f.Var(sets, "set", "broker setting `name=value` by its Kafka name, after --config (repeatable)")
	logLevel := f.String("log-level", "info", "debug, info, warn or error")
	metricsAddr := f.String("metrics-listen", "", "serve Prometheus /metrics on this address")
	// Fault injection for the e2e tests, deliberately left out of the usage
	// line: writes not yet fsynced stay in the process's memory, so a
	// SIGKILL loses what a power cut would (broker.Config.HoldUnsyncedWrites).
	holdUnsynced := f.Bool("hold-unsynced-writes", false, "")
	if _, err := f.parse(args, 0); err != nil {
		return err
	}
	logger, err := newLogger(e, *logLevel)
	if err != nil {
		return err
	}

	cfg := broker.DefaultConfig()
	if *configFile != "" {
		file, err := os.Open(*configFile)
		if err != nil {
			return err
		}
		err = cfg.LoadProperties(file)
		file.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", *configFile, err)
		}
	}
	for name, value := range sets {
		if err := cfg.Set(name, value); err != nil {
			return err
		}
	}
	// Flags given explicitly win over the file, as users expect.
	explicit := visited(f)
	if explicit["listen"] || cfg.Kafka.Listener == broker.DefaultConfig().Kafka.Listener {
		cfg.Kafka.Listener = *listen
	}
	if explicit["data"] || cfg.DataDir == "" {
		cfg.DataDir = *data
	}
	if explicit["id"] || cfg.Kafka.BrokerID == 0 {
		cfg.Kafka.BrokerID = int32(*id)
	}
	if explicit["zookeeper"] {
		cfg.ZooKeeper = *zookeeper
	}
	if cfg.DataDir == "" {
		return usageError("--data DIR is required")
	}
	cfg.HoldUnsyncedWrites = *holdUnsynced
	reg := newRegistry()
	cfg.Metrics = reg
	waitMetrics, err := serveMetrics(ctx, *metricsAddr, reg, logger)
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
