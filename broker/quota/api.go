package quota

// The rules of DescribeClientQuotas and AlterClientQuotas (KIP-546) that
// do not depend on the wire: which entities a request may name, which
// values it may set, and which entities a describe filter matches. The
// handlers in broker/kafka answer INVALID_REQUEST with these errors.

import (
	"errors"
	"fmt"
	"math"
)

// The entity types of the quota APIs.
const (
	TypeUser     = "user"
	TypeClientID = "client-id"
	TypeIP       = "ip"
)

// ErrInvalid marks a request the quota APIs refuse (INVALID_REQUEST).
var ErrInvalid = errors.New("invalid quota request")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Component is one part of an entity as the APIs carry it: a type and a
// name, nil for the default.
type Component struct {
	Type string
	Name *string
}

// ParseEntity turns an alteration's components into an Entity, by
// Kafka's rules (ClientQuotaControlManager.configKeysForEntityType): a
// user, a client ID or both, each at most once, with a non-empty name or
// the default; or an ip alone, never with a user or a client ID, named by
// an address (host names are not resolved) or the default.
func ParseEntity(components []Component) (Entity, error) {
	var e Entity
	if len(components) == 0 {
		return e, invalid("the entity is empty: name a user, a client-id, both, or an ip")
	}
	for _, c := range components {
		name := Default
		if c.Name != nil && *c.Name == "" {
			return e, invalid("an empty %s name: give a name, or null for the default", c.Type)
		}
		switch c.Type {
		case TypeUser, TypeClientID:
			if c.Name != nil {
				name = Sanitize(*c.Name)
			}
		case TypeIP:
			if c.Name != nil {
				ip, ok := CanonicalIP(*c.Name)
				if !ok {
					return e, invalid("%q is not an IP address (host names are not resolved)", *c.Name)
				}
				name = ip
			}
		}
		switch c.Type {
		case TypeUser:
			if e.HasUser {
				return e, invalid("the entity names a user twice")
			}
			e.HasUser, e.User = true, name
		case TypeClientID:
			if e.HasClientID {
				return e, invalid("the entity names a client-id twice")
			}
			e.HasClientID, e.ClientID = true, name
		case TypeIP:
			if e.HasIP {
				return e, invalid("the entity names an ip twice")
			}
			e.HasIP, e.IP = true, name
		default:
			return e, invalid("unknown entity type %q: the types are user, client-id and ip", c.Type)
		}
	}
	if e.HasIP && (e.HasUser || e.HasClientID) {
		return e, invalid("an ip entity cannot be combined with a user or a client-id")
	}
	return e, nil
}

// Components is ParseEntity's inverse, user first, names unsanitized and
// nil for a default.
func (e Entity) Components() []Component {
	var out []Component
	name := func(s string) *string {
		if s == Default {
			return nil
		}
		n := Unsanitize(s)
		return &n
	}
	if e.HasUser {
		out = append(out, Component{TypeUser, name(e.User)})
	}
	if e.HasClientID {
		out = append(out, Component{TypeClientID, name(e.ClientID)})
	}
	if e.HasIP {
		ip := &e.IP
		if e.IP == Default {
			ip = nil
		}
		out = append(out, Component{TypeIP, ip})
	}
	return out
}

// CheckValue checks a value set for key: a known quota, not negative, a
// whole number for the byte rates, which Kafka types as longs, and for
// connection_creation_rate, an int.
func CheckValue(key string, value float64) (Kind, error) {
	kind, err := kindOf(key)
	if err != nil {
		return "", invalid("%v", err)
	}
	switch {
	case math.IsNaN(value) || math.IsInf(value, 0):
		return "", invalid("%s must be a finite number", key)
	case value < 0:
		return "", invalid("%s must not be negative, got %v", key, value)
	case (kind == ProducerByteRate || kind == ConsumerByteRate) && (value != math.Trunc(value) || value > math.MaxInt64):
		return "", invalid("%s must be a whole number of bytes per second, got %v", key, value)
	case kind == ConnectionCreationRate && (value != math.Trunc(value) || value > math.MaxInt32):
		return "", invalid("%s must be a whole number of connections per second up to %d, got %v", key, math.MaxInt32, value)
	}
	return kind, nil
}

// Check is CheckValue for a key set on e: the key must also be one of
// the entity's (Kinds), as Kafka takes an entity's valid keys from its
// type: connection_creation_rate for an ip only, the client quotas for
// users and client IDs only.
func (e Entity) Check(key string, value float64) (Kind, error) {
	kind, err := CheckValue(key, value)
	if err != nil {
		return "", err
	}
	if holds(e, kind) {
		return kind, nil
	}
	if e.HasIP {
		return "", invalid("%s is not a quota of an ip: an ip has only %s", key, ConnectionCreationRate)
	}
	return "", invalid("%s is a quota of an ip, not of a user or a client-id", key)
}

// MatchType is how a describe filter component matches (Kafka's
// ClientQuotaFilterComponent).
type MatchType int8

// The match types, as numbered on the wire.
const (
	MatchExact   MatchType = 0 // the entity's name equals the match
	MatchDefault MatchType = 1 // the entity is the default
	MatchAny     MatchType = 2 // the entity has the type, any name or default
)

// FilterComponent is one component of a describe filter.
type FilterComponent struct {
	Type  string
	Match MatchType
	Name  *string // for MatchExact
}

// Filter is a DescribeClientQuotas filter: every component must match,
// and with Strict the entity has no other types.
type Filter struct {
	Components []FilterComponent
	Strict     bool
}

// Validate checks the filter as Kafka does: known types, each once, a
// name with every exact match, a known match type, and no ip with a user
// or a client-id (ClientQuotasImage.describe: "IP filter component should
// not be used with user or clientId filter component").
func (f Filter) Validate() error {
	seen := map[string]bool{}
	for _, c := range f.Components {
		switch c.Type {
		case TypeUser, TypeClientID, TypeIP:
		default:
			return invalid("unknown entity type %q in the filter", c.Type)
		}
		if seen[c.Type] {
			return invalid("the filter names %s twice", c.Type)
		}
		seen[c.Type] = true
		switch c.Match {
		case MatchExact:
			if c.Name == nil {
				return invalid("an exact match of %s needs a name", c.Type)
			}
		case MatchDefault, MatchAny:
		default:
			return invalid("unknown match type %d", c.Match)
		}
	}
	if seen[TypeIP] && (seen[TypeUser] || seen[TypeClientID]) {
		return invalid("an ip filter component cannot be used with a user or a client-id one")
	}
	return nil
}

// Matches reports whether e passes the filter. An exact ip matches any
// spelling of the address (0:0::1 matches ::1).
func (f Filter) Matches(e Entity) bool {
	var user, client, ip bool
	for _, c := range f.Components {
		var has bool
		var stored, name, want string // stored: as in the entity; name: for people
		switch c.Type {
		case TypeUser:
			has, stored, user = e.HasUser, e.User, true
			name = Unsanitize(stored)
		case TypeClientID:
			has, stored, client = e.HasClientID, e.ClientID, true
			name = Unsanitize(stored)
		case TypeIP:
			has, stored, ip = e.HasIP, e.IP, true
			name = stored
		default:
			return false // Validate refuses it
		}
		if !has {
			return false
		}
		switch c.Match {
		case MatchExact:
			want = *c.Name
			if canonical, ok := CanonicalIP(want); ok && c.Type == TypeIP {
				want = canonical
			}
			if stored == Default || name != want {
				return false
			}
		case MatchDefault:
			if stored != Default {
				return false
			}
		}
	}
	if f.Strict && (e.HasUser && !user || e.HasClientID && !client || e.HasIP && !ip) {
		return false
	}
	return true
}

// Op is one operation of an alteration: set Key to Value, or remove it.
type Op struct {
	Key    string
	Value  float64
	Remove bool
}

// ParseOps checks an alteration's operations on e (Check for each value
// set, a key of e's for each removed, no key twice) and splits them into
// values to set and quotas to remove.
func ParseOps(e Entity, ops []Op) (map[Kind]float64, []Kind, error) {
	set := map[Kind]float64{}
	var remove []Kind
	seen := map[string]bool{}
	for _, op := range ops {
		value := op.Value
		if op.Remove {
			value = 0
		}
		kind, err := e.Check(op.Key, value)
		if err != nil {
			return nil, nil, err
		}
		if seen[op.Key] {
			return nil, nil, invalid("%s is altered twice in one entry", op.Key)
		}
		seen[op.Key] = true
		if op.Remove {
			remove = append(remove, kind)
		} else {
			set[kind] = value
		}
	}
	return set, remove, nil
}
