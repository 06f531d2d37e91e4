package kafka

import (
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"millrace/broker/quota"
	"millrace/broker/replica"
	"millrace/broker/txn"
	"millrace/internal/settings"
)

// Config is the wire server's configuration, named after Kafka's broker
// configs. DefaultConfig fills in Kafka's defaults.
type Config struct {
	// Listener (listeners, default "PLAINTEXT://:9092") is the
	// comma-separated list of listeners to bind, each "NAME://host:port"
	// (e.g. "INTERNAL://127.0.0.1:9093,EXTERNAL://0.0.0.0:9094"); a plain
	// "host:port" is one listener named PLAINTEXT. Port 0 picks a free
	// port. Names are unique, as are non-zero ports; the security protocol
	// of each comes from ListenerSecurityProtocolMap.
	Listener string
	// ListenerSecurityProtocolMap (listener.security.protocol.map, default
	// "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")
	// maps listener names to security protocols, "NAME:PROTOCOL,...".
	ListenerSecurityProtocolMap string
	// AdvertisedListener (advertised.listeners, default empty = the bound
	// addresses, with the host of each listener, or "localhost" where that
	// is empty or unspecified) is the comma-separated list of addresses
	// given to clients, "NAME://host:port" for listeners of the same name;
	// a listener not named is advertised at its bound address. A plain
	// "host:port" is allowed when there is one listener. Clients get the
	// address of the listener they connected to in Metadata,
	// FindCoordinator and DescribeCluster; all are registered in
	// /brokers/ids.
	AdvertisedListener string
	// InterBrokerListenerName (inter.broker.listener.name, default empty =
	// the listener named PLAINTEXT, else the first) is the listener other
	// brokers connect to for replication; its host and port are also
	// registered as /brokers/ids' host and port.
	InterBrokerListenerName string
	// SSLKeystoreType (ssl.keystore.type, default "PEM"; Kafka's is JKS,
	// which millrace does not read) must be PEM.
	SSLKeystoreType string
	// SSLKeystoreLocation (ssl.keystore.location, default empty) is a PEM
	// file holding the unencrypted private key and the certificate chain,
	// leaf first. SSL and SASL_SSL listeners present it, and replication
	// connections to an SSL inter-broker listener present it as the
	// client certificate. Required when a listener uses TLS.
	SSLKeystoreLocation string
	// SSLTruststoreType (ssl.truststore.type, default "PEM") must be PEM.
	SSLTruststoreType string
	// SSLTruststoreLocation (ssl.truststore.location, default empty = the
	// system's roots) is a PEM file of the CA certificates that client
	// certificates and, for replication, other brokers' certificates are
	// verified against. Required when ssl.client.auth is not none.
	SSLTruststoreLocation string
	// SSLClientAuth (ssl.client.auth, default "none") is whether TLS
	// listeners ask for client certificates: none, requested (verified
	// when given) or required. A client that presents one acts as
	// "User:" plus its certificate subject (RFC 2253, e.g.
	// "User:CN=alice,O=acme"); one that does not as User:ANONYMOUS.
	SSLClientAuth string
	// BrokerID (broker.id, default 0) identifies this broker.
	BrokerID int32
	// Rack (broker.rack, default empty) is reported in Metadata (KIP-36),
	// spreads the replicas of new partitions over racks, and is matched
	// against consumers' racks by ReplicaSelectorClass (KIP-392).
	Rack string
	// ReplicaSelectorClass (replica.selector.class, default empty = every
	// consumer reads from the leader) picks the replica a consumer should
	// read from (KIP-392): Kafka's
	// org.apache.kafka.common.replica.RackAwareReplicaSelector sends a
	// consumer whose client.rack holds an in-sync follower, and not the
	// leader, to that follower (fetch_read_replica.go). Followers serve the
	// consumers sent to them whatever this says, as in Kafka.
	ReplicaSelectorClass string
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

	// MaxConnections (max.connections, default 4096; Kafka's is 2^31-1) is
	// the most client connections the broker holds open; a connection
	// beyond it is closed as soon as it is accepted. An idle connection
	// costs two goroutines and a few KiB of buffers, so the default holds
	// the open connections of a few hundred producers and consumers (a
	// client keeps one to three per broker) with a wide margin, and bounds
	// what a connection flood can hold to about 100 MiB.
	MaxConnections int
	// MaxConnectionsPerIP (max.connections.per.ip, default 1000; Kafka's is
	// 2^31-1) is the most connections from one IP address, so that one
	// host cannot take every connection. Loopback is not exempt.
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides (max.connections.per.ip.overrides,
	// default none) replaces MaxConnectionsPerIP for the IP addresses named,
	// written as Kafka does: "127.0.0.1:5000,10.0.0.7:200". Only IP
	// addresses are matched; host names are not resolved.
	MaxConnectionsPerIPOverrides map[string]int
	// MaxConnectionCreationRate (max.connection.creation.rate, default
	// Kafka's 2147483647, unpaced) is the connections per second each
	// listener accepts; beyond a burst of one second's worth, accepting
	// waits (KIP-612, conn_rate.go). Connections are slowed, not refused.
	// The rate per IP address is not a setting but, as in Kafka, the
	// connection_creation_rate quota of an ip entity (broker/quota).
	MaxConnectionCreationRate int
	// LeaderReplicationThrottledRate (leader.replication.throttled.rate,
	// default Kafka's 9223372036854775807, unbounded) is the record bytes
	// per second this broker, as leader, sends to out-of-sync followers of
	// the replicas a topic's leader.replication.throttled.replicas lists
	// (replication_throttle.go).
	LeaderReplicationThrottledRate int64
	// FollowerReplicationThrottledRate (follower.replication.throttled.rate,
	// default unbounded) is the record bytes per second this broker, as
	// follower, fetches for the not caught-up replicas a topic's
	// follower.replication.throttled.replicas lists, from all its leaders
	// together (broker/interbroker/throttle.go).
	FollowerReplicationThrottledRate int64
	// QueuedMaxRequestBytes (queued.max.request.bytes, default 104857600;
	// Kafka's is -1, unbounded) is a broker-wide budget of request bytes
	// read and not yet answered, counting for requests other than Produce
	// what decoding them may allocate (requestDecodeFactor times the
	// frame). A connection that cannot get budget for the bytes it is about
	// to read stops being read until answers free some: the client sees
	// its requests slow down, not refused. -1 disables the budget. It must
	// be at least socket.request.max.bytes, as in Kafka, so that the
	// largest request fits.
	QueuedMaxRequestBytes int64
	// RequestReadTimeout (millrace.request.read.timeout.ms, default 30 s) is
	// how long a request may take to arrive once its first byte has: the
	// whole frame, not each read. A client's own request timeout
	// (request.timeout.ms) is 30 s by default, so a frame still arriving
	// after that is of no use to it; a connection that trickles a frame
	// is closed instead of held. connections.max.idle.ms still governs the
	// wait between requests.
	RequestReadTimeout time.Duration
	// ControlRequestMaxBytes (millrace.control.request.max.bytes, default
	// 1048576) is the largest frame of a request other than Produce, the
	// only API whose requests carry record data, and the most bytes of a
	// Produce request besides its record batches. Decoding can allocate up
	// to about requestDecodeFactor times the bytes decoded (arrays of empty
	// structs, tagged fields), so a 100 MiB Metadata request could cost
	// gigabytes. 1 MiB holds a Metadata request naming tens of
	// thousands of topics or an OffsetCommit of tens of thousands of
	// partitions; the leader's SyncGroup of a very large group may need
	// more. A larger frame closes the connection with a log line.
	ControlRequestMaxBytes int32
	// FetchMaxWait (millrace.fetch.max.wait.ms, default 30 s) caps a Fetch
	// request's max_wait_ms. Clients ask for 500 ms (librdkafka, Java) to
	// 5 s (franz-go); a waiting Fetch holds a goroutine and, with
	// queued.max.request.bytes, part of the budget, so a client asking for
	// days is answered after this instead. 30 s stays below clients' own
	// request timeouts plus their wait, so no client times out waiting.
	FetchMaxWait time.Duration
	// ClientIDMaxBytes (millrace.client.id.max.bytes, default 1024; Kafka has
	// no limit) is the longest client ID accepted in a request header. The
	// client ID is logged and kept in group member IDs, so it is bounded;
	// real clients use tens of bytes ("rdkafka", "kafka-python-2.0.2",
	// "consumer-<group>-1"). A longer one closes the connection with a log
	// line naming the length.
	ClientIDMaxBytes int
	// ProducerIDExpiration (producer.id.expiration.ms, default 86400000 =
	// 1 day, Kafka's) is how long a partition remembers an idempotent
	// producer after its last write; a producer idle for longer is
	// forgotten, and its next batch is accepted at any sequence.
	ProducerIDExpiration time.Duration
	// MaxProducerIDsPerPartition (millrace.max.producer.ids.per.partition,
	// default 10000; Kafka has no such limit) bounds the producers a
	// partition remembers. Any client can write batches under ever-new
	// producer IDs, each remembered for ProducerIDExpiration; beyond the
	// limit the producers idle the longest are forgotten first (they lose
	// duplicate detection for a retry of their last batches, nothing
	// else). One producer costs about 250 bytes.
	MaxProducerIDsPerPartition int
	// FetchSessionCacheSlots (max.incremental.fetch.session.cache.slots,
	// default 1000, Kafka's) is the most fetch sessions (KIP-227) the
	// broker keeps; 0 turns sessions off, every fetch then being a full
	// one. A session holds the parameters and last answered offsets of
	// each partition its consumer or follower fetches (365 to 575 bytes a
	// partition, counted as 400 plus its topic's share against
	// FetchSessionCacheMaxBytes), so that incremental fetches name only
	// what changed.
	// When the cache is full, a new session takes the slot of one unused
	// for FetchSessionEvictionMin, else of a smaller one older than that
	// (a follower's session also of a consumer's); otherwise the client
	// gets no session and keeps sending full fetches.
	FetchSessionCacheSlots int
	// FetchSessionEvictionMin (min.incremental.fetch.session.eviction.ms,
	// default 120000, Kafka's) is how long a fetch session is safe from
	// eviction by a larger one after it was created, and how long unused
	// before any new session may take its slot.
	FetchSessionEvictionMin time.Duration
	// FetchSessionsPerConnection (millrace.fetch.sessions.per.connection,
	// default 4; Kafka has no such limit) bounds the sessions opened on one
	// connection and still cached. A client fetches from a broker through
	// one connection and keeps one session there, so a connection at the
	// bound that opens another has moved on from its oldest: that one
	// (least recently used) makes room. Without it one connection could
	// fill every slot.
	FetchSessionsPerConnection int
	// FetchSessionsPerPrincipal (millrace.fetch.sessions.per.principal,
	// default 250, a quarter of the slots; Kafka has no such limit) bounds
	// the sessions of one principal, so one user (User:ANONYMOUS included)
	// cannot take every slot. A principal at the bound gets a new session
	// only by evicting one of its own under Kafka's rules (unused for
	// FetchSessionEvictionMin, or smaller and older than that); otherwise
	// it fetches without one.
	FetchSessionsPerPrincipal int
	// FetchSessionCacheMaxBytes (millrace.fetch.session.cache.max.bytes,
	// default 67108864 = 64 MiB; Kafka bounds only the slots) is the memory
	// all sessions may hold, counted as fetchSessionBytes per session,
	// fetchSessionPartitionBytes per partition and the topic names
	// (fetch_session_bounds.go: 400 bytes a partition, about 160,000
	// partitions at the default).
	// A new session that does not fit evicts as Kafka's slot rules allow,
	// or gets none; a session that grows past it, and evicts nothing, is
	// closed and the fetch answered without it.
	FetchSessionCacheMaxBytes int64
	// Txn holds the transaction coordinator's settings (transaction.*,
	// transactional.id.*; broker/txn's Settings). The broker fills in the
	// coordinator's hooks when it opens it.
	Txn txn.Config

	// Authorizer holds the ACL settings (authorize.go).
	Authorizer AuthorizerConfig

	// SASL holds the SASL settings (sasl_config.go).
	SASL SASLConfig

	// Quotas decides how long a client over its quotas is throttled
	// (broker/quota; enforced in throttle.go). Nil, the default, is
	// quota.None: no quotas, and nothing recorded per request.
	Quotas quota.Limiter
}

// DefaultConfig returns Kafka's defaults, with bounds where Kafka has none
// (connection counts, the request byte budget) and millrace's own settings.
func DefaultConfig() Config {
	return Config{
		Listener:                         "PLAINTEXT://:9092",
		ListenerSecurityProtocolMap:      defaultSecurityProtocolMap,
		SSLKeystoreType:                  "PEM",
		SSLTruststoreType:                "PEM",
		SSLClientAuth:                    "none",
		BrokerID:                         0,
		SocketRequestMaxBytes:            104857600,
		AutoCreateTopics:                 true,
		NumPartitions:                    1,
		DefaultReplicationFactor:         1,
		ConnectionsMaxIdle:               10 * time.Minute,
		MaxPipelinedRequests:             16,
		MaxConnections:                   4096,
		MaxConnectionsPerIP:              1000,
		MaxConnectionCreationRate:        math.MaxInt32,
		LeaderReplicationThrottledRate:   math.MaxInt64,
		FollowerReplicationThrottledRate: math.MaxInt64,
		QueuedMaxRequestBytes:            104857600,
		RequestReadTimeout:               30 * time.Second,
		ControlRequestMaxBytes:           1 << 20,
		FetchMaxWait:                     30 * time.Second,
		ClientIDMaxBytes:                 1024,

		ProducerIDExpiration:       24 * time.Hour,
		MaxProducerIDsPerPartition: 10000,
		FetchSessionCacheSlots:     1000,
		FetchSessionEvictionMin:    120 * time.Second,
		FetchSessionsPerConnection: 4,
		FetchSessionsPerPrincipal:  250,
		FetchSessionCacheMaxBytes:  64 << 20,

		Txn: txn.DefaultConfig(),

		SASL: defaultSASLConfig(),
	}
}

// requestHeaderMinBytes is the smallest request header: api key (2), api
// version (2), correlation id (4), client id length (2).
const requestHeaderMinBytes = 10

// Validate rejects impossible settings with a sentence that says why.
func (c Config) Validate() error {
	var errs []error
	errs = append(errs, c.validateListeners()...)
	if c.BrokerID < 0 {
		errs = append(errs, fmt.Errorf("broker.id %d must not be negative", c.BrokerID))
	}
	if !replica.ValidSelectorClass(c.ReplicaSelectorClass) {
		errs = append(errs, fmt.Errorf("replica.selector.class %q is not a selector millrace has: leave it empty (consumers read from leaders) or set %s", c.ReplicaSelectorClass, replica.RackAwareSelectorClass))
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
	if c.MaxConnectionCreationRate < 1 {
		errs = append(errs, fmt.Errorf("max.connection.creation.rate %d must be at least 1 connection per second", c.MaxConnectionCreationRate))
	}
	if c.LeaderReplicationThrottledRate < 0 || c.FollowerReplicationThrottledRate < 0 {
		errs = append(errs, fmt.Errorf("leader.replication.throttled.rate %d and follower.replication.throttled.rate %d must not be negative", c.LeaderReplicationThrottledRate, c.FollowerReplicationThrottledRate))
	}
	if c.MaxPipelinedRequests < 1 {
		errs = append(errs, fmt.Errorf("millrace.max.pipelined.requests %d must be at least 1", c.MaxPipelinedRequests))
	}
	if c.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("max.connections %d must be at least 1", c.MaxConnections))
	}
	if c.MaxConnectionsPerIP < 1 {
		errs = append(errs, fmt.Errorf("max.connections.per.ip %d must be at least 1", c.MaxConnectionsPerIP))
	}
	for ip, n := range c.MaxConnectionsPerIPOverrides {
		if net.ParseIP(ip) == nil {
			errs = append(errs, fmt.Errorf("max.connections.per.ip.overrides: %q is not an IP address (host names are not resolved)", ip))
		}
		if n < 0 {
			errs = append(errs, fmt.Errorf("max.connections.per.ip.overrides: %s:%d must not be negative", ip, n))
		}
	}
	if c.QueuedMaxRequestBytes != -1 && c.QueuedMaxRequestBytes < int64(c.SocketRequestMaxBytes) {
		errs = append(errs, fmt.Errorf("queued.max.request.bytes %d must be -1 (unbounded) or at least socket.request.max.bytes %d, or the largest request could never be read", c.QueuedMaxRequestBytes, c.SocketRequestMaxBytes))
	}
	if c.RequestReadTimeout <= 0 {
		errs = append(errs, fmt.Errorf("millrace.request.read.timeout.ms %v must be positive", c.RequestReadTimeout))
	}
	if c.ControlRequestMaxBytes < requestHeaderMinBytes {
		errs = append(errs, fmt.Errorf("millrace.control.request.max.bytes %d cannot hold a request header (%d bytes)", c.ControlRequestMaxBytes, requestHeaderMinBytes))
	}
	if c.FetchMaxWait < 0 {
		errs = append(errs, fmt.Errorf("millrace.fetch.max.wait.ms %v must not be negative", c.FetchMaxWait))
	}
	if c.ProducerIDExpiration <= 0 {
		errs = append(errs, fmt.Errorf("producer.id.expiration.ms %v must be positive", c.ProducerIDExpiration))
	}
	if c.MaxProducerIDsPerPartition < 1 {
		errs = append(errs, fmt.Errorf("millrace.max.producer.ids.per.partition %d must be at least 1", c.MaxProducerIDsPerPartition))
	}
	if c.FetchSessionCacheSlots < 0 {
		errs = append(errs, fmt.Errorf("max.incremental.fetch.session.cache.slots %d must not be negative (0 turns fetch sessions off)", c.FetchSessionCacheSlots))
	}
	if c.FetchSessionEvictionMin < 0 {
		errs = append(errs, fmt.Errorf("min.incremental.fetch.session.eviction.ms %v must not be negative", c.FetchSessionEvictionMin))
	}
	if c.FetchSessionsPerConnection < 1 {
		errs = append(errs, fmt.Errorf("millrace.fetch.sessions.per.connection %d must be at least 1 (max.incremental.fetch.session.cache.slots=0 turns sessions off)", c.FetchSessionsPerConnection))
	}
	if c.FetchSessionsPerPrincipal < 1 {
		errs = append(errs, fmt.Errorf("millrace.fetch.sessions.per.principal %d must be at least 1 (max.incremental.fetch.session.cache.slots=0 turns sessions off)", c.FetchSessionsPerPrincipal))
	}
	if c.FetchSessionCacheMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("millrace.fetch.session.cache.max.bytes %d must not be negative (0 holds no session)", c.FetchSessionCacheMaxBytes))
	}
	if c.ClientIDMaxBytes < 0 {
		errs = append(errs, fmt.Errorf("millrace.client.id.max.bytes %d must not be negative", c.ClientIDMaxBytes))
	}
	if err := c.Txn.Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.Authorizer.validate()...)
	errs = append(errs, c.SASL.validate(c.ConnectionsMaxIdle)...)
	return errors.Join(errs...)
}

// Settings are the wire server's settings (its own, the authorizer's,
// SASL's and the transaction coordinator's, txn.Settings), by Kafka's
// broker config names; DescribeConfigs lists them for a broker. None
// changes at runtime.
var Settings = settings.Join(settings.NewList(settingError,
	settings.Str("listeners", settings.String, "where to listen: `NAME://host:port,...` for several named listeners", func(c *Config) *string { return &c.Listener }),
	settings.Str("advertised.listeners", settings.String, "what to tell clients; empty: the bound addresses", func(c *Config) *string { return &c.AdvertisedListener }),
	settings.Str("listener.security.protocol.map", settings.String, "each listener's security protocol, `NAME:PROTOCOL,...`", func(c *Config) *string { return &c.ListenerSecurityProtocolMap }),
	settings.Str("inter.broker.listener.name", settings.String, "the listener other brokers connect to; empty: PLAINTEXT, else the first", func(c *Config) *string { return &c.InterBrokerListenerName }),
	settings.Str("ssl.keystore.type", settings.String, "must be PEM", func(c *Config) *string { return &c.SSLKeystoreType }),
	settings.Str("ssl.keystore.location", settings.String, "PEM file of the key and certificate chain TLS listeners present", func(c *Config) *string { return &c.SSLKeystoreLocation }),
	settings.Str("ssl.truststore.type", settings.String, "must be PEM", func(c *Config) *string { return &c.SSLTruststoreType }),
	settings.Str("ssl.truststore.location", settings.String, "PEM file of the CAs client and broker certificates are checked against; empty: the system's", func(c *Config) *string { return &c.SSLTruststoreLocation }),
	settings.Str("ssl.client.auth", settings.String, "whether TLS listeners ask for client certificates: none, requested or required", func(c *Config) *string { return &c.SSLClientAuth }),
	integer("broker.id", settings.Int, "this broker's ID", func(c *Config) *int32 { return &c.BrokerID }),
	settings.Str("broker.rack", settings.String, "the broker's rack, reported in Metadata; new topics spread replicas over racks", func(c *Config) *string { return &c.Rack }),
	settings.Str("replica.selector.class", settings.Class, "`org.apache.kafka.common.replica.RackAwareReplicaSelector` sends consumers to an in-sync follower in their rack (KIP-392); empty: leaders", func(c *Config) *string { return &c.ReplicaSelectorClass }),
	integer("socket.request.max.bytes", settings.Int, "a larger request closes the connection", func(c *Config) *int32 { return &c.SocketRequestMaxBytes }),
	boolean("auto.create.topics.enable", "a Metadata request naming a missing topic creates it", func(c *Config) *bool { return &c.AutoCreateTopics }),
	integer("num.partitions", settings.Int, "partitions of a topic created without a count", func(c *Config) *int32 { return &c.NumPartitions }),
	integer("default.replication.factor", settings.Int, "replication factor of a topic created without one", func(c *Config) *int16 { return &c.DefaultReplicationFactor }),
	ms("connections.max.idle.ms", "a connection idle this long is closed", func(c *Config) *time.Duration { return &c.ConnectionsMaxIdle }),
	integer("millrace.max.pipelined.requests", settings.Int, "requests of one connection read but not yet answered", func(c *Config) *int { return &c.MaxPipelinedRequests }),
	integer("max.connections", settings.Int, "client connections held open; more are closed when accepted", func(c *Config) *int { return &c.MaxConnections }),
	integer("max.connections.per.ip", settings.Int, "connections from one IP address", func(c *Config) *int { return &c.MaxConnectionsPerIP }),
	settings.Setting[Config]{Name: "max.connections.per.ip.overrides", Type: settings.String, Doc: "`ip:count,...` replacing max.connections.per.ip for those addresses",
		Parse: func(c *Config, v string) error {
			overrides, err := parseIPOverrides(v)
			if err != nil {
				return err
			}
			c.MaxConnectionsPerIPOverrides = overrides
			return nil
		},
		Format: func(c Config) string { return formatIPOverrides(c.MaxConnectionsPerIPOverrides) },
	},
	integer("max.connection.creation.rate", settings.Int, "new connections per second on each listener; beyond, accepting waits (KIP-612)", func(c *Config) *int { return &c.MaxConnectionCreationRate }),
	integer("leader.replication.throttled.rate", settings.Long, "record bytes per second sent to out-of-sync followers of the replicas topics list in leader.replication.throttled.replicas", func(c *Config) *int64 { return &c.LeaderReplicationThrottledRate }),
	integer("follower.replication.throttled.rate", settings.Long, "record bytes per second fetched, as follower, for the not caught-up replicas topics list in follower.replication.throttled.replicas", func(c *Config) *int64 { return &c.FollowerReplicationThrottledRate }),
	integer("queued.max.request.bytes", settings.Long, "request bytes read and not yet answered, broker-wide; -1: no budget", func(c *Config) *int64 { return &c.QueuedMaxRequestBytes }),
	ms("millrace.request.read.timeout.ms", "how long a request may take to arrive once its first byte has", func(c *Config) *time.Duration { return &c.RequestReadTimeout }),
	integer("millrace.control.request.max.bytes", settings.Int, "largest request other than Produce, and Produce's bytes besides its batches", func(c *Config) *int32 { return &c.ControlRequestMaxBytes }),
	ms("millrace.fetch.max.wait.ms", "cap on a Fetch request's max_wait_ms", func(c *Config) *time.Duration { return &c.FetchMaxWait }),
	integer("millrace.client.id.max.bytes", settings.Int, "longest client ID in a request header", func(c *Config) *int { return &c.ClientIDMaxBytes }),
	intMs("producer.id.expiration.ms", "an idempotent producer idle this long is forgotten", func(c *Config) *time.Duration { return &c.ProducerIDExpiration }),
	integer("millrace.max.producer.ids.per.partition", settings.Int, "producers a partition remembers; the longest idle are forgotten first", func(c *Config) *int { return &c.MaxProducerIDsPerPartition }),
	integer("max.incremental.fetch.session.cache.slots", settings.Int, "fetch sessions (KIP-227) held; 0: none", func(c *Config) *int { return &c.FetchSessionCacheSlots }),
	intMs("min.incremental.fetch.session.eviction.ms", "how long a new fetch session is kept from eviction", func(c *Config) *time.Duration { return &c.FetchSessionEvictionMin }),
	integer("millrace.fetch.sessions.per.connection", settings.Int, "fetch sessions opened on one connection", func(c *Config) *int { return &c.FetchSessionsPerConnection }),
	integer("millrace.fetch.sessions.per.principal", settings.Int, "fetch sessions of one principal", func(c *Config) *int { return &c.FetchSessionsPerPrincipal }),
	integer("millrace.fetch.session.cache.max.bytes", settings.Long, "memory all fetch sessions hold", func(c *Config) *int64 { return &c.FetchSessionCacheMaxBytes }),
), authorizerSettings, saslSettings,
	// The coordinator's settings, with this package's error messages.
	settings.NewList(settingError, settings.Lift(txn.Settings, func(c *Config) *txn.Config { return &c.Txn }).All()...))

// settingError is the wire server's message for a refused value.
func settingError(name, value string, err error) error {
	return fmt.Errorf("kafka: %s=%q: %w", name, value, err)
}

// integer, boolean and ms are the kafka package's setting shapes, with
// its error messages.
func integer[T int | int16 | int32 | int64](name string, typ settings.Type, doc string, dst func(*Config) *T) settings.Setting[Config] {
	bits := 32 // int fields take Kafka's INT range
	switch any(*new(T)).(type) {
	case int16:
		bits = 16
	case int64:
		bits = 64
	}
	return settings.Integer(name, typ, bits, doc, dst)
}

func boolean(name, doc string, dst func(*Config) *bool) settings.Setting[Config] {
	return settings.Bool(name, doc, func(error) error { return errors.New("must be true or false") }, dst)
}

func ms(name, doc string, dst func(*Config) *time.Duration) settings.Setting[Config] {
	return settings.Duration(name, time.Millisecond, doc, func(error) error { return errors.New("must be a number of milliseconds") }, dst)
}

// intMs is a setting of milliseconds that Kafka declares an INT.
func intMs(name, doc string, dst func(*Config) *time.Duration) settings.Setting[Config] {
	s := ms(name, doc, dst)
	s.Type = settings.Int
	return s
}

// parseIPOverrides parses Kafka's "ip:count,ip:count" list. The count
// follows the last colon, so IPv6 addresses need no brackets.
func parseIPOverrides(v string) (map[string]int, error) {
	out := map[string]int{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndex(item, ":")
		if i < 0 {
			return nil, fmt.Errorf("%q is not ip:count", item)
		}
		n, err := strconv.Atoi(strings.TrimSpace(item[i+1:]))
		if err != nil {
			return nil, fmt.Errorf("%q: the count is not a number", item)
		}
		ip := strings.Trim(strings.TrimSpace(item[:i]), "[]")
		if parsed := net.ParseIP(ip); parsed != nil {
			ip = parsed.String() // the form RemoteAddr reports
		}
		out[ip] = n
	}
	return out, nil
}

// formatIPOverrides is parseIPOverrides' inverse, sorted.
func formatIPOverrides(m map[string]int) string {
	items := make([]string, 0, len(m))
	for ip, n := range m {
		items = append(items, ip+":"+strconv.Itoa(n))
	}
	sort.Strings(items)
	return strings.Join(items, ",")
}

// ConfigNames returns the broker config names Set and Values use, sorted.
func ConfigNames() []string { return Settings.Names() }

// Set changes one setting by its Kafka broker-config name. It does not
// validate the whole Config; call Validate.
func (c *Config) Set(name, value string) error {
	if ok, err := Settings.Set(c, name, value); ok {
		return err
	}
	if name == removedPerIPRate {
		return fmt.Errorf("kafka: %s is no longer a broker config: the rate per IP address is Kafka's connection_creation_rate quota of an ip entity; set it with `millrace quota set --ip-default connection_creation_rate=N` (or --ip ADDR)", name)
	}
	return fmt.Errorf("kafka: unknown broker config %q", name)
}

// removedPerIPRate is the setting that stood in for Kafka's IP quotas
// until they came (conn_rate.go); Set says what replaced it.
const removedPerIPRate = "millrace.max.connection.creation.rate.per.ip"

// Values returns every setting by its Kafka name.
func (c Config) Values() map[string]string { return Settings.Values(c) }
