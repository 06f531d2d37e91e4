package quota

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strings"
)

// Default is the name Kafka stores for a default entity
// (ConfigEntityName.Default). It can never be a sanitized name: sanitizing
// escapes '<' and '>'.
const Default = "<default>"

// Entity is what a quota is set for: a user, a client ID, or both, each a
// sanitized name (Sanitize) or Default; or an IP address (KIP-612), alone.
// It is also the key of the sensor a client's usage is recorded in:
// clients resolving to the same entity share one quota, as in Kafka.
type Entity struct {
	// HasUser and User: the user component (sanitized, or Default).
	HasUser bool
	User    string
	// HasClientID and ClientID: the client-id component (sanitized, or
	// Default).
	HasClientID bool
	ClientID    string
	// HasIP and IP: the ip component, an address in CanonicalIP's form
	// or Default. Kafka never combines it with a user or a client ID,
	// and gives it one quota, connection_creation_rate.
	HasIP bool
	IP    string
}

// UserEntity is the entity of one user (sanitized name or Default).
func UserEntity(user string) Entity { return Entity{HasUser: true, User: user} }

// ClientEntity is the entity of one client ID (sanitized or Default).
func ClientEntity(clientID string) Entity { return Entity{HasClientID: true, ClientID: clientID} }

// UserClientEntity is the entity of one user's client ID.
func UserClientEntity(user, clientID string) Entity {
	return Entity{HasUser: true, User: user, HasClientID: true, ClientID: clientID}
}

// IPEntity is the entity of one IP address (CanonicalIP's form) or, with
// Default, of every address without a quota of its own.
func IPEntity(ip string) Entity { return Entity{HasIP: true, IP: ip} }

// CanonicalIP is the one spelling of an IP address that names its
// entity: ::ffff:10.0.0.1 is 10.0.0.1, 0:0::1 is ::1, as Go prints a
// connection's remote address. Host names are not resolved (Kafka's
// admin path resolves them once, at write time, which pins a quota to
// whatever address the name had then); ok is false for anything that is
// not an address, and for an IPv6 zone (fe80::1%eth0), which a
// connection's peer address never carries.
func CanonicalIP(s string) (string, bool) {
	addr, err := netip.ParseAddr(s)
	if err != nil || addr.Zone() != "" {
		return "", false
	}
	return addr.Unmap().String(), true
}

// Kinds is the quota types the entity can hold, as Kafka's config keys
// per entity type: connection_creation_rate for an IP, the client quotas
// for the others.
func (e Entity) Kinds() []Kind {
	if e.HasIP {
		return []Kind{ConnectionCreationRate}
	}
	return Kinds
}

// Path is the entity's path under /config, as Kafka writes it in change
// notifications: "users/<user>", "clients/<client-id>",
// "users/<user>/clients/<client-id>" or "ips/<ip>".
func (e Entity) Path() string {
	switch {
	case e.HasIP:
		return "ips/" + e.IP
	case e.HasUser && e.HasClientID:
		return "users/" + e.User + "/clients/" + e.ClientID
	case e.HasUser:
		return "users/" + e.User
	default:
		return "clients/" + e.ClientID
	}
}

// String is the entity for people: "user=alice, client-id=app", with
// names unsanitized and defaults as <default>.
func (e Entity) String() string {
	var parts []string
	if e.HasUser {
		parts = append(parts, "user="+Unsanitize(e.User))
	}
	if e.HasClientID {
		parts = append(parts, "client-id="+Unsanitize(e.ClientID))
	}
	if e.HasIP {
		parts = append(parts, "ip="+e.IP)
	}
	return strings.Join(parts, ", ")
}

// ParseEntityPath is Path's inverse; ok is false for a path that names no
// quota entity (a topic's or a broker's config, say). An IP's node must
// be named by CanonicalIP's form, as AlterClientQuotas names it: a node
// written by hand in another spelling (0:0::1 for ::1) is not read,
// since connections would never be matched to it.
func ParseEntityPath(path string) (Entity, bool) {
	parts := strings.Split(path, "/")
	valid := func(s string) bool { return s != "" && (s == Default || Unsanitize(s) != "") }
	switch {
	case len(parts) == 2 && parts[0] == "ips" && validIP(parts[1]):
		return IPEntity(parts[1]), true
	case len(parts) == 2 && parts[0] == "users" && valid(parts[1]):
		return UserEntity(parts[1]), true
	case len(parts) == 2 && parts[0] == "clients" && valid(parts[1]):
		return ClientEntity(parts[1]), true
	case len(parts) == 4 && parts[0] == "users" && parts[2] == "clients" && valid(parts[1]) && valid(parts[3]):
		return UserClientEntity(parts[1], parts[3]), true
	}
	return Entity{}, false
}

// validIP reports whether name can name an IP entity's node: Default, or
// an address in CanonicalIP's form.
func validIP(name string) bool {
	if name == Default {
		return true
	}
	ip, ok := CanonicalIP(name)
	return ok && ip == name
}

// Sanitize makes a user or client ID one path component as Kafka's
// Sanitizer does: URL encoding (Java's URLEncoder, which escapes '~' and
// keeps '*'), then '*' as %2A and '+' (a space) as %20. Go's QueryEscape
// already escapes '*' and keeps '~', so only '~' and spaces need fixing.
// The same names are used for SCRAM credentials (broker/users).
func Sanitize(name string) string {
	s := url.QueryEscape(name)
	s = strings.ReplaceAll(s, "+", "%20")
	return strings.ReplaceAll(s, "~", "%7E")
}

// Unsanitize is Sanitize's inverse; Default stays Default, and a name
// that is not valid percent-encoding comes back empty.
func Unsanitize(name string) string {
	if name == Default {
		return Default
	}
	s, err := url.PathUnescape(name)
	if err != nil {
		return ""
	}
	return s
}

// positions is the number of places a quota can be found for a client.
const positions = 8

// candidate is the p-th entity whose quota applies to (user, clientID),
// in Kafka's precedence order (DefaultQuotaCallback), with the sensor key
// a client matching it records into. A default entity's quota applies to
// each user or client separately, so its key names the actual user or
// client; a user's quota is shared by all of that user's clients, so its
// key has no client ID. user and clientID are sanitized.
func candidate(p int, user, clientID string) (match, key Entity) {
	switch p {
	case 0: // /config/users/<user>/clients/<client-id>
		return UserClientEntity(user, clientID), UserClientEntity(user, clientID)
	case 1: // /config/users/<user>/clients/<default>
		return UserClientEntity(user, Default), UserClientEntity(user, clientID)
	case 2: // /config/users/<user>
		return UserEntity(user), UserEntity(user)
	case 3: // /config/users/<default>/clients/<client-id>
		return UserClientEntity(Default, clientID), UserClientEntity(user, clientID)
	case 4: // /config/users/<default>/clients/<default>
		return UserClientEntity(Default, Default), UserClientEntity(user, clientID)
	case 5: // /config/users/<default>
		return UserEntity(Default), UserEntity(user)
	case 6: // /config/clients/<client-id>
		return ClientEntity(clientID), ClientEntity(clientID)
	default: // /config/clients/<default>
		return ClientEntity(Default), ClientEntity(clientID)
	}
}

// kindOf checks a configuration key, naming the valid ones when it is not.
func kindOf(key string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == key {
			return k, nil
		}
	}
	if key == string(ConnectionCreationRate) {
		return ConnectionCreationRate, nil
	}
	return "", fmt.Errorf("%q is not a quota; the quotas are %s, %s, %s and %s, and %s for an ip", key, ProducerByteRate, ConsumerByteRate, RequestPercentage, ControllerMutationRate, ConnectionCreationRate)
}

// Kinds lists the client quota types (those of users and client IDs) in
// Kafka's order; an IP's is ConnectionCreationRate.
var Kinds = []Kind{ProducerByteRate, ConsumerByteRate, RequestPercentage, ControllerMutationRate}

// ConnectionCreationRate bounds the connections an IP address opens per
// second (KIP-612): over it, the broker holds a new connection back
// (broker/kafka/conn_rate.go). Kafka types it INT, with 2147483647, its
// default, meaning no bound. It is not among Kinds: the request path's
// limiter never sees it.
const ConnectionCreationRate Kind = "connection_creation_rate"

// ConnectionCreationRate is the connection_creation_rate that applies to
// connections from ip (CanonicalIP's form), as Kafka's ConnectionQuotas
// resolves it: the address's own quota, else the default ip entity's; ok
// is false when neither is set, and connections are then not paced by
// address. The accept path asks it once per connection.
func (m *Manager) ConnectionCreationRate(ip string) (rate int, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, e := range [2]Entity{IPEntity(ip), IPEntity(Default)} {
		if v, ok := m.quotas[e][ConnectionCreationRate]; ok {
			return int(min(v, math.MaxInt32)), true
		}
	}
	return 0, false
}
