package cluster

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Topic is one topic's metadata. Values handed out by Cluster are immutable
// snapshots: a change builds a new Topic, so a handler may keep and read one
// without locks, and must not modify it.
type Topic struct {
	Name string
	// ID is the topic's UUID (KIP-516), generated at creation and kept in
	// /brokers/topics/<topic>.
	ID [16]byte
	// Partitions is indexed by partition number, 0..len-1.
	Partitions []*PartitionState
	// Config holds the per-topic overrides only (from /config/topics/<topic>);
	// the effective config adds the broker defaults (see Cluster.TopicConfig).
	Config map[string]string
}

// PartitionState is one partition's replica assignment and leadership, as in
// /brokers/topics/<topic>/partitions/<p>/state. Immutable like Topic.
type PartitionState struct {
	Topic     string
	Partition int32
	// Replicas is the assignment; the first replica is the preferred leader.
	Replicas []int32
	// Leader is the broker ID of the leader, -1 when there is none.
	Leader int32
	// LeaderEpoch is bumped by every leadership change (KIP-101, KIP-279).
	LeaderEpoch int32
	// ISR is the in-sync replica set.
	ISR []int32
	// ControllerEpoch is the epoch of the controller that wrote this state.
	ControllerEpoch int32
	// StateVersion is the version of the state znode this was read from,
	// the compare-and-set token for the next write (not part of the JSON).
	StateVersion int32
}

// BrokerInfo is a live broker's registration at /brokers/ids/<id>.
type BrokerInfo struct {
	ID int32
	// Host and Port are the inter-broker listener's advertised address.
	Host string
	Port int32
	Rack string // empty when unset
	// Endpoints are the advertised listeners, the inter-broker one first.
	Endpoints []Endpoint
}

// Endpoint is one advertised listener of a broker, written in
// /brokers/ids/<id> as "NAME://host:port" with its protocol in
// listener_security_protocol_map.
type Endpoint struct {
	// Listener is the listener's name (PLAINTEXT, INTERNAL, ...).
	Listener string
	// SecurityProtocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
	SecurityProtocol string
	Host             string
	Port             int32
}

// Endpoint returns the broker's endpoint of the named listener; ok is false
// when the broker has no such listener.
func (b BrokerInfo) Endpoint(listener string) (e Endpoint, ok bool) {
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			return e, true
		}
	}
	return Endpoint{}, false
}

// TopicIDString renders a topic ID the way Kafka does: URL-safe base64 without
// padding (22 characters).
func TopicIDString(id [16]byte) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// ParseTopicID reverses TopicIDString.
func ParseTopicID(s string) ([16]byte, error) {
	var id [16]byte
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) != 16 {
		return id, fmt.Errorf("topic id %q is not 22 characters of URL-safe base64", s)
	}
	copy(id[:], raw)
	return id, nil
}

// newTopicID makes a random (version 4) UUID. Like Kafka it avoids the
// all-zero ID (reserved for "no ID") and IDs whose string form starts with '-',
// which command-line tools would read as a flag.
func newTopicID() ([16]byte, error) {
	for {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return id, fmt.Errorf("generating a topic id: %w", err)
		}
		id[6] = id[6]&0x0f | 0x40 // version 4
		id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
		if id != ([16]byte{}) && TopicIDString(id)[0] != '-' {
			return id, nil
		}
	}
}

// The znode formats below are the seed's (and Kafka's ZooKeeper-mode) JSON.

// topicZnode is /brokers/topics/<topic>:
//
//	{"version":2,"partitions":{"0":[1,2]},"topic_id":"<22 chars>"}
//
// where partitions maps partition number to its replica list.
type topicZnode struct {
	Version    int                `json:"version"`
	Partitions map[string][]int32 `json:"partitions"`
	TopicID    string             `json:"topic_id"`
}

// partitionStateZnode is /brokers/topics/<topic>/partitions/<p>/state:
//
//	{"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1}
//
// Kafka also writes "version":1, which we keep for its tools.
type partitionStateZnode struct {
	Version         int     `json:"version"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
	ControllerEpoch int32   `json:"controller_epoch"`
}

// configZnode is /config/topics/<topic>: {"version":1,"config":{"retention.ms":"1000"}}.
type configZnode struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

// brokerZnode is /brokers/ids/<id>, Kafka's version 4 layout:
//
//	{"version":4,"host":"h","port":9092,"rack":"r",
//	 "endpoints":["INTERNAL://h:9092","EXTERNAL://e:9094"],
//	 "listener_security_protocol_map":{"INTERNAL":"SSL","EXTERNAL":"SASL_SSL"}}
//
// host and port are the inter-broker listener's, for readers that know only
// those; rack is omitted when unset. A registration without endpoints (an
// older millrace's) is one PLAINTEXT listener at host:port.
type brokerZnode struct {
	Version                     int               `json:"version"`
	Host                        string            `json:"host"`
	Port                        int32             `json:"port"`
	Rack                        *string           `json:"rack,omitempty"`
	Endpoints                   []string          `json:"endpoints,omitempty"`
	ListenerSecurityProtocolMap map[string]string `json:"listener_security_protocol_map,omitempty"`
}

// encodeBroker is the registration of a broker with these endpoints, the
// first being the inter-broker listener's.
func encodeBroker(endpoints []Endpoint, rack string) []byte {
	z := brokerZnode{Version: 4, Host: endpoints[0].Host, Port: endpoints[0].Port, ListenerSecurityProtocolMap: make(map[string]string, len(endpoints))}
	if rack != "" {
		z.Rack = &rack
	}
	for _, e := range endpoints {
		z.Endpoints = append(z.Endpoints, e.Listener+"://"+net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))))
		z.ListenerSecurityProtocolMap[e.Listener] = e.SecurityProtocol
	}
	return mustJSON(z)
}

// decodeBroker reads a registration. An endpoint whose listener is not in
// the protocol map is taken to be named after its protocol (PLAINTEXT://),
// as Kafka's default map has it.
func decodeBroker(id int32, data []byte) (BrokerInfo, error) {
	var z brokerZnode
	if err := json.Unmarshal(data, &z); err != nil {
		return BrokerInfo{}, err
	}
	info := BrokerInfo{ID: id, Host: z.Host, Port: z.Port}
	if z.Rack != nil {
		info.Rack = *z.Rack
	}
	if len(z.Endpoints) == 0 {
		info.Endpoints = []Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: z.Host, Port: z.Port}}
		return info, nil
	}
	for _, text := range z.Endpoints {
		name, addr, ok := strings.Cut(text, "://")
		if !ok {
			return BrokerInfo{}, fmt.Errorf("endpoint %q is not NAME://host:port", text)
		}
		host, portText, err := net.SplitHostPort(addr)
		if err != nil {
			return BrokerInfo{}, fmt.Errorf("endpoint %q: %w", text, err)
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil {
			return BrokerInfo{}, fmt.Errorf("endpoint %q: port %q is not a number from 0 to 65535", text, portText)
		}
		protocol, ok := z.ListenerSecurityProtocolMap[name]
		if !ok {
			protocol = name
		}
		info.Endpoints = append(info.Endpoints, Endpoint{Listener: name, SecurityProtocol: protocol, Host: host, Port: int32(port)})
	}
	return info, nil
}

func encodeTopic(t *Topic) []byte {
	z := topicZnode{Version: 2, Partitions: make(map[string][]int32, len(t.Partitions)), TopicID: TopicIDString(t.ID)}
	for _, p := range t.Partitions {
		z.Partitions[strconv.Itoa(int(p.Partition))] = p.Replicas
	}
	return mustJSON(z)
}

func decodeTopic(name string, data []byte) (*Topic, error) {
	var z topicZnode
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("topic %q: decoding the assignment: %w", name, err)
	}
	id, err := ParseTopicID(z.TopicID)
	if err != nil {
		return nil, fmt.Errorf("topic %q: %w", name, err)
	}
	t := &Topic{Name: name, ID: id, Partitions: make([]*PartitionState, len(z.Partitions))}
	for key, replicas := range z.Partitions {
		p, err := strconv.Atoi(key)
		if err != nil || p < 0 || p >= len(z.Partitions) {
			return nil, fmt.Errorf("topic %q: partition %q is not in 0..%d", name, key, len(z.Partitions)-1)
		}
		t.Partitions[p] = &PartitionState{Topic: name, Partition: int32(p), Replicas: replicas, Leader: -1}
	}
	return t, nil
}

func encodePartitionState(p *PartitionState) []byte {
	return mustJSON(partitionStateZnode{Version: 1, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ISR: p.ISR, ControllerEpoch: p.ControllerEpoch})
}

func decodePartitionState(p *PartitionState, data []byte) error {
	var z partitionStateZnode
	if err := json.Unmarshal(data, &z); err != nil {
		return fmt.Errorf("topic %q partition %d: decoding the state: %w", p.Topic, p.Partition, err)
	}
	p.Leader, p.LeaderEpoch, p.ISR, p.ControllerEpoch = z.Leader, z.LeaderEpoch, z.ISR, z.ControllerEpoch
	return nil
}

func encodeConfig(overrides map[string]string) []byte {
	if overrides == nil {
		overrides = map[string]string{}
	}
	return mustJSON(configZnode{Version: 1, Config: overrides})
}

func decodeConfig(name string, data []byte) (map[string]string, error) {
	var z configZnode
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("topic %q: decoding the config overrides: %w", name, err)
	}
	if z.Config == nil {
		z.Config = map[string]string{}
	}
	return z.Config, nil
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		// Only plain structs of strings, ints and maps are marshalled here.
		panic("cluster: marshalling a znode: " + err.Error())
	}
	return data
}

// clone returns a copy of the partition state whose slices are not shared.
func (p *PartitionState) clone() *PartitionState {
	c := *p
	c.Replicas = slices.Clone(p.Replicas)
	c.ISR = slices.Clone(p.ISR)
	return &c
}

// sortedNames returns a map's keys in order.
func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
