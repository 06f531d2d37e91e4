package kafka

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config is the wire server's configuration, named after Kafka's broker
// configs. DefaultConfig fills in Kafka's defaults.
type Config struct {
	// Listener (listeners, default "PLAINTEXT://:9092") is the address to bind,
	// "host:port" or "PLAINTEXT://host:port". Port 0 picks a free port.
	Listener string
	// AdvertisedListener (advertised.listeners, default empty = the bound
	// address, with the host of Listener or "localhost" when that is empty
	// or unspecified) is the address given to clients in Metadata and
	// FindCoordinator responses and registered in /brokers/ids.
	AdvertisedListener string
	// BrokerID (broker.id, default 0) identifies this broker.
	BrokerID int32
	// Rack (broker.rack, default empty) is reported in Metadata (KIP-36).
	Rack string
	// SocketRequestMaxBytes (socket.request.max.bytes, default 104857600) is
	// the largest request frame accepted; a larger size prefix closes the
	// connection before anything is allocated for it.
	SocketRequestMaxBytes int32
	// AutoCreateTopics (auto.create.topics.enable, default true) lets a
	// Metadata request that names a missing topic create it.
	AutoCreateTopics bool
	// NumPartitions (num.partitions, default 1) is the partition count of
	// topics created without one.
	NumPartitions int32
	// DefaultReplicationFactor (default.replication.factor, default 1) is the
	// replication factor of topics created without one.
	DefaultReplicationFactor int16
	// ConnectionsMaxIdle (connections.max.idle.ms, default 10 minutes) closes
	// connections with no request in flight for this long.
	ConnectionsMaxIdle time.Duration
	// MaxPipelinedRequests (millrace.max.pipelined.requests, default 16) bounds
	// the requests of one connection read but not yet answered. Kafka reads
	// one request per connection at a time; millrace reads ahead so that a
	// blocking request (JoinGroup, long-poll Fetch) does not stall the ones
	// behind it, and this bounds the memory that costs.
	MaxPipelinedRequests int
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		Listener:                 "PLAINTEXT://:9092",
		BrokerID:                 0,
		SocketRequestMaxBytes:    104857600,
		AutoCreateTopics:         true,
		NumPartitions:            1,
		DefaultReplicationFactor: 1,
		ConnectionsMaxIdle:       10 * time.Minute,
		MaxPipelinedRequests:     16,
	}
}

// requestHeaderMinBytes is the smallest request header: api key (2), api
// version (2), correlation id (4), client id length (2).
const requestHeaderMinBytes = 10

// Validate rejects impossible settings with a sentence that says why.
func (c Config) Validate() error {
	var errs []error
	if _, _, err := splitListener(c.Listener); err != nil {
		errs = append(errs, fmt.Errorf("listeners: %w", err))
	}
	if c.AdvertisedListener != "" {
		host, port, err := splitListener(c.AdvertisedListener)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("advertised.listeners: %w", err))
		case host == "" || port == 0:
			errs = append(errs, fmt.Errorf("advertised.listeners %q needs a host and a non-zero port: clients connect to it", c.AdvertisedListener))
		}
	}
	if c.BrokerID < 0 {
		errs = append(errs, fmt.Errorf("broker.id %d must not be negative", c.BrokerID))
	}
	if c.SocketRequestMaxBytes < requestHeaderMinBytes {
		errs = append(errs, fmt.Errorf("socket.request.max.bytes %d cannot hold a request header (%d bytes)", c.SocketRequestMaxBytes, requestHeaderMinBytes))
	}
	if c.NumPartitions < 1 {
		errs = append(errs, fmt.Errorf("num.partitions %d must be at least 1", c.NumPartitions))
	}
	if c.DefaultReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("default.replication.factor %d must be at least 1", c.DefaultReplicationFactor))
	}
	if c.ConnectionsMaxIdle <= 0 {
		errs = append(errs, fmt.Errorf("connections.max.idle.ms %v must be positive", c.ConnectionsMaxIdle))
	}
	if c.MaxPipelinedRequests < 1 {
		errs = append(errs, fmt.Errorf("millrace.max.pipelined.requests %d must be at least 1", c.MaxPipelinedRequests))
	}
	return errors.Join(errs...)
}

// splitListener parses "host:port" or "PLAINTEXT://host:port". Only the
// PLAINTEXT security protocol is served.
func splitListener(s string) (host string, port int32, err error) {
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		if !strings.EqualFold(scheme, "PLAINTEXT") {
			return "", 0, fmt.Errorf("%q: only PLAINTEXT listeners are supported, not %s", s, scheme)
		}
		s = rest
	}
	if strings.Contains(s, ",") {
		return "", 0, fmt.Errorf("%q: only one listener is supported", s)
	}
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port: %w", s, err)
	}
	p, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("%q: port %q is not a number from 0 to 65535", s, portText)
	}
	return host, int32(p), nil
}

// configEntry describes one broker config for Set and Values.
type configEntry struct {
	set func(c *Config, v string) error
	get func(c Config) string
}

func intSetter[T int | int16 | int32](bits int, dst func(*Config) *T) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return fmt.Errorf("must be an integer: %w", err)
		}
		*dst(c) = T(n)
		return nil
	}
}

var configEntries = map[string]configEntry{
	"listeners": {
		func(c *Config, v string) error { c.Listener = v; return nil },
		func(c Config) string { return c.Listener },
	},
	"advertised.listeners": {
		func(c *Config, v string) error { c.AdvertisedListener = v; return nil },
		func(c Config) string { return c.AdvertisedListener },
	},
	"broker.id": {
		intSetter(32, func(c *Config) *int32 { return &c.BrokerID }),
		func(c Config) string { return strconv.Itoa(int(c.BrokerID)) },
	},
	"broker.rack": {
		func(c *Config, v string) error { c.Rack = v; return nil },
		func(c Config) string { return c.Rack },
	},
	"socket.request.max.bytes": {
		intSetter(32, func(c *Config) *int32 { return &c.SocketRequestMaxBytes }),
		func(c Config) string { return strconv.Itoa(int(c.SocketRequestMaxBytes)) },
	},
	"auto.create.topics.enable": {
		func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("must be true or false")
			}
			c.AutoCreateTopics = b
			return nil
		},
		func(c Config) string { return strconv.FormatBool(c.AutoCreateTopics) },
	},
	"num.partitions": {
		intSetter(32, func(c *Config) *int32 { return &c.NumPartitions }),
		func(c Config) string { return strconv.Itoa(int(c.NumPartitions)) },
	},
	"default.replication.factor": {
		intSetter(16, func(c *Config) *int16 { return &c.DefaultReplicationFactor }),
		func(c Config) string { return strconv.Itoa(int(c.DefaultReplicationFactor)) },
	},
	"connections.max.idle.ms": {
		func(c *Config, v string) error {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
				return fmt.Errorf("must be a number of milliseconds")
			}
			c.ConnectionsMaxIdle = time.Duration(ms) * time.Millisecond
			return nil
		},
		func(c Config) string { return strconv.FormatInt(c.ConnectionsMaxIdle.Milliseconds(), 10) },
	},
	"millrace.max.pipelined.requests": {
		intSetter(32, func(c *Config) *int { return &c.MaxPipelinedRequests }),
		func(c Config) string { return strconv.Itoa(c.MaxPipelinedRequests) },
	},
}

// ConfigNames returns the broker config names Set and Values use, sorted.
func ConfigNames() []string {
	names := make([]string, 0, len(configEntries))
	for name := range configEntries {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Set changes one setting by its Kafka broker-config name. It does not
// validate the whole Config; call Validate.
func (c *Config) Set(name, value string) error {
	e, ok := configEntries[name]
	if !ok {
		return fmt.Errorf("kafka: unknown broker config %q", name)
	}
	if err := e.set(c, value); err != nil {
		return fmt.Errorf("kafka: %s=%q: %w", name, value, err)
	}
	return nil
}

// Values returns every setting by its Kafka name.
func (c Config) Values() map[string]string {
	out := make(map[string]string, len(configEntries))
	for name, e := range configEntries {
		out[name] = e.get(c)
	}
	return out
}
