package quota

// Quotas in the coordination store, at Kafka's ZooKeeper paths and in its
// format, so the same tree serves Kafka's tools:
//
//	/config/users/<user>                      {"version":1,"config":{"producer_byte_rate":"1048576", ...}}
//	/config/users/<user>/clients/<client-id>  the same format
//	/config/clients/<client-id>               the same format
//	/config/ips/<ip>                          {"version":1,"config":{"connection_creation_rate":"10"}}
//	/config/changes/config_change_<seq>       {"version":2,"entity_path":"users/alice/clients/app"}
//
// User and client names are sanitized (Sanitize); an IP is named by its
// address as CanonicalIP spells it, unsanitized as in Kafka (whose
// notification for it reads "entity_path":"ips/10.0.0.1"); a default is
// <default>, so /config/ips/<default> is every address's. A user's node is
// shared with its SCRAM credentials (broker/users): writes here change the
// quota keys only, under the node's version, so neither writer loses the
// other's keys. Byte rates are written as whole numbers and the other
// quotas as decimals, as Kafka types them (LONG and DOUBLE); an IP's
// connection_creation_rate, an INT, as a whole number too.

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"millrace/broker/coord"
)

// Store paths.
const (
	UsersPath   = "/config/users"
	ClientsPath = "/config/clients"
	IPsPath     = "/config/ips"
	ChangesPath = "/config/changes"
	// changePrefix names the sequential notification nodes.
	changePrefix = "config_change_"
	// keepChanges is how many notifications are kept after a write, as
	// broker/users keeps them; a follower that falls further behind
	// reloads everything.
	keepChanges = 100
)

// errUndecodable marks a node that is not Kafka's entity config format.
var errUndecodable = errors.New("not Kafka's entity config format")

// configNode is an entity's node: Kafka's entity config format.
type configNode struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

// changeNode is a change notification (Kafka's version 2 format).
type changeNode struct {
	Version    int    `json:"version"`
	EntityPath string `json:"entity_path"`
}

// nodePath is the entity's node.
func nodePath(e Entity) string { return "/config/" + e.Path() }

// decode reads a node's quota keys for e (Entity.Kinds), ignoring the
// others (SCRAM credentials, or a key another tool wrote that e's type
// cannot hold). Empty data, as ZooKeeper gives a parent Kafka created on
// the way, is an empty config.
func decode(e Entity, data []byte) (map[Kind]float64, error) {
	var n configNode
	if len(data) > 0 {
		if err := json.Unmarshal(data, &n); err != nil {
			return nil, fmt.Errorf("%w: %v", errUndecodable, err)
		}
	}
	values := map[Kind]float64{}
	for key, v := range n.Config {
		kind, err := kindOf(key)
		if err != nil || !holds(e, kind) {
			continue // a SCRAM credential, or another entity config
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: %s is %q, not a number", errUndecodable, key, v)
		}
		values[kind] = f
	}
	return values, nil
}

// Read returns an entity's quotas; none when it has no node.
func Read(s coord.Store, e Entity) (map[Kind]float64, error) {
	data, _, err := s.Get(nodePath(e))
	if errors.Is(err, coord.ErrNoNode) {
		return map[Kind]float64{}, nil
	}
	if err != nil {
		return nil, err
	}
	values, err := decode(e, data)
	if err != nil {
		return nil, fmt.Errorf("quota: %s: %w", e, err)
	}
	return values, nil
}

// List returns every entity with at least one quota. A node that cannot
// be decoded is left out rather than failing the whole list.
func List(s coord.Store) (map[Entity]map[Kind]float64, error) {
	out := map[Entity]map[Kind]float64{}
	add := func(e Entity) error {
		values, err := Read(s, e)
		if errors.Is(err, errUndecodable) {
			return nil // damaged: left out, and Read says why
		}
		if err != nil {
			return err
		}
		if len(values) > 0 {
			out[e] = values
		}
		return nil
	}
	children := func(path string) ([]string, error) {
		names, err := s.Children(path)
		if errors.Is(err, coord.ErrNoNode) {
			return nil, nil
		}
		return names, err
	}
	users, err := children(UsersPath)
	if err != nil {
		return nil, err
	}
	for _, u := range users {
		if err := add(UserEntity(u)); err != nil {
			return nil, err
		}
		clients, err := children(UsersPath + "/" + u + "/clients")
		if err != nil {
			return nil, err
		}
		for _, c := range clients {
			if err := add(UserClientEntity(u, c)); err != nil {
				return nil, err
			}
		}
	}
	clients, err := children(ClientsPath)
	if err != nil {
		return nil, err
	}
	for _, c := range clients {
		if err := add(ClientEntity(c)); err != nil {
			return nil, err
		}
	}
	ips, err := children(IPsPath)
	if err != nil {
		return nil, err
	}
	for _, ip := range ips {
		if e, ok := ParseEntityPath("ips/" + ip); ok {
			if err := add(e); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// holds reports whether kind is one of e's quota types.
func holds(e Entity, kind Kind) bool {
	for _, k := range e.Kinds() {
		if k == kind {
			return true
		}
	}
	return false
}

// Format writes a quota value as Kafka stores it: byte rates and
// connection rates as whole numbers, the others as decimals.
func Format(kind Kind, value float64) string {
	if kind == ProducerByteRate || kind == ConsumerByteRate || kind == ConnectionCreationRate {
		return strconv.FormatInt(int64(value), 10)
	}
	return strconv.FormatFloat(value, 'f', -1, 64)
}

// Alter sets and removes an entity's quotas in one write with its change
// notification, keeping the node's other keys, retrying when another
// writer got there first. An entity left with no keys and no children
// loses its node.
func Alter(s coord.Store, e Entity, set map[Kind]float64, remove []Kind) error {
	parents := []string{ChangesPath, coord.ParentPath(nodePath(e))}
	if e.HasUser && e.HasClientID {
		// The user's node is a parent: give it Kafka's format, so the
		// SCRAM store can add credentials to it.
		if err := ensureEntityNode(s, UserEntity(e.User)); err != nil {
			return err
		}
	}
	for _, p := range parents {
		if err := coord.EnsurePath(s, p); err != nil {
			return err
		}
	}
	path := nodePath(e)
	notice, err := json.Marshal(changeNode{Version: 2, EntityPath: e.Path()})
	if err != nil {
		return err
	}
	for {
		node := configNode{Version: 1, Config: map[string]string{}}
		data, stat, err := s.Get(path)
		exists := err == nil
		switch {
		case errors.Is(err, coord.ErrNoNode):
		case err != nil:
			return err
		case len(data) > 0:
			if err := json.Unmarshal(data, &node); err != nil {
				return fmt.Errorf("quota: %s: decoding the node: %w", e, err)
			}
			if node.Config == nil {
				node.Config = map[string]string{}
			}
			node.Version = 1
		}
		for _, k := range remove {
			delete(node.Config, string(k))
		}
		for k, v := range set {
			node.Config[string(k)] = Format(k, v)
		}
		encoded, err := json.Marshal(node)
		if err != nil {
			return err
		}
		var write coord.Op
		switch {
		case !exists && len(node.Config) == 0:
			return nil // nothing to remove
		case !exists:
			write = coord.CreateOp{Path: path, Data: encoded, Mode: coord.Persistent}
		case len(node.Config) == 0 && stat.NumChildren == 0:
			write = coord.DeleteOp{Path: path, Version: stat.Version}
		default:
			write = coord.SetOp{Path: path, Data: encoded, Version: stat.Version}
		}
		err = s.Multi(write, coord.CreateOp{Path: ChangesPath + "/" + changePrefix, Data: notice, Mode: coord.PersistentSequential})
		if errors.Is(err, coord.ErrBadVersion) || errors.Is(err, coord.ErrNodeExists) || errors.Is(err, coord.ErrNoNode) || errors.Is(err, coord.ErrNotEmpty) {
			continue // a concurrent writer: read again
		}
		if err != nil {
			return fmt.Errorf("quota: writing %s: %w", e, err)
		}
		if _, isDelete := write.(coord.DeleteOp); isDelete && e.HasUser && e.HasClientID {
			if err := removeEmptyParents(s, e.User); err != nil {
				return fmt.Errorf("quota: removing %s's empty nodes: %w", UserEntity(e.User), err)
			}
		}
		return pruneChanges(s)
	}
}

// ensureEntityNode creates an entity's node with an empty config when it
// has none.
func ensureEntityNode(s coord.Store, e Entity) error {
	if err := coord.EnsurePath(s, coord.ParentPath(nodePath(e))); err != nil {
		return err
	}
	empty, _ := json.Marshal(configNode{Version: 1, Config: map[string]string{}})
	_, err := s.Create(nodePath(e), empty, coord.Persistent)
	if errors.Is(err, coord.ErrNodeExists) {
		return nil
	}
	return err
}

// removeEmptyParents deletes a user's clients node and the user's node
// once they hold nothing, so deleting the last user+client quota leaves
// no trace. Either may have been filled meanwhile; then it stays.
func removeEmptyParents(s coord.Store, user string) error {
	kept := func(err error) bool {
		return errors.Is(err, coord.ErrNotEmpty) || errors.Is(err, coord.ErrNoNode) || errors.Is(err, coord.ErrBadVersion)
	}
	if err := s.Delete(UsersPath+"/"+user+"/clients", coord.AnyVersion); err != nil {
		if kept(err) {
			return nil
		}
		return err
	}
	data, stat, err := s.Get(UsersPath + "/" + user)
	if err != nil {
		if kept(err) {
			return nil
		}
		return err
	}
	var n configNode
	if len(data) > 0 && (json.Unmarshal(data, &n) != nil || len(n.Config) > 0) {
		return nil
	}
	if err := s.Delete(UsersPath+"/"+user, stat.Version); err != nil && !kept(err) {
		return err
	}
	return nil
}

// pruneChanges deletes all but the newest keepChanges notifications.
func pruneChanges(s coord.Store) error {
	names, err := notifications(s)
	if err != nil {
		return err
	}
	for len(names) > keepChanges {
		if err := s.Delete(ChangesPath+"/"+names[0], coord.AnyVersion); err != nil && !errors.Is(err, coord.ErrNoNode) {
			return err
		}
		names = names[1:]
	}
	return nil
}

// notifications lists the change notifications, oldest first (sequence
// suffixes are zero-padded, so name order is creation order).
func notifications(s coord.Store) ([]string, error) {
	names, err := s.Children(ChangesPath)
	if err != nil {
		return nil, err
	}
	var ours []string
	for _, n := range names {
		if strings.HasPrefix(n, changePrefix) {
			ours = append(ours, n)
		}
	}
	sort.Strings(ours)
	return ours, nil
}
