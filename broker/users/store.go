package users

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"millrace/broker/coord"
)

// Store paths (Kafka's ZooKeeper layout; see the package comment).
const (
	UsersPath   = "/config/users"
	ChangesPath = "/config/changes"
	// changePrefix names the sequential notification nodes.
	changePrefix = "config_change_"
	// keepChanges is how many notifications are kept after a write. Caches
	// reload everything on any notification, so older ones carry nothing
	// a cache still needs; Kafka's brokers delete theirs after 15 minutes.
	keepChanges = 100
)

// ErrNoUser is returned for a user (or a user's mechanism) that has no
// stored credential.
var ErrNoUser = errors.New("users: no such user")

// errUndecodable marks a user node that is not Kafka's JSON format.
var errUndecodable = errors.New("decoding the node")

// userNode is a user's node: Kafka's entity config format.
type userNode struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

// changeNode is a change notification (Kafka's version 2 format).
type changeNode struct {
	Version    int    `json:"version"`
	EntityPath string `json:"entity_path"`
}

// nodeName is the store node name of a user, sanitized as Kafka does
// (URL encoding, with spaces as %20 and '~' as %7E), so any name is one
// path component.
func nodeName(user string) string {
	s := url.QueryEscape(user)
	s = strings.ReplaceAll(s, "+", "%20")
	return strings.ReplaceAll(s, "~", "%7E")
}

// userName is nodeName's inverse.
func userName(node string) (string, error) { return url.QueryUnescape(node) }

func userPath(user string) string { return UsersPath + "/" + nodeName(user) }

// Get returns a user's credentials by mechanism; ErrNoUser when the user
// has none. Entries this version cannot read are skipped.
func Get(s coord.Store, user string) (map[string]Credential, error) {
	if err := CheckName(user); err != nil {
		return nil, err
	}
	data, _, err := s.Get(userPath(user))
	if errors.Is(err, coord.ErrNoNode) {
		return nil, fmt.Errorf("%w: %q", ErrNoUser, user)
	}
	if err != nil {
		return nil, err
	}
	creds, err := decodeUser(user, data)
	if err != nil {
		return nil, err
	}
	if len(creds) == 0 {
		return nil, fmt.Errorf("%w: %q", ErrNoUser, user)
	}
	return creds, nil
}

func decodeUser(user string, data []byte) (map[string]Credential, error) {
	var n userNode
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("users: %q: %w: %v", user, errUndecodable, err)
	}
	creds := map[string]Credential{}
	for mech, v := range n.Config {
		if _, ok := Hash(mech); !ok {
			continue // another entity config, not a SCRAM credential
		}
		c, err := ParseCredential(mech, v)
		if err != nil {
			return nil, fmt.Errorf("users: %q: %w", user, err)
		}
		creds[mech] = c
	}
	return creds, nil
}

// List returns every user with at least one credential, by name. A node
// that cannot be decoded is left out (and Get reports why) rather than
// failing the whole list, so one damaged user cannot lock every user out.
func List(s coord.Store) (map[string]map[string]Credential, error) {
	nodes, err := s.Children(UsersPath)
	if errors.Is(err, coord.ErrNoNode) {
		return map[string]map[string]Credential{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]Credential, len(nodes))
	for _, node := range nodes {
		user, err := userName(node)
		if err != nil {
			continue // not written by this package
		}
		creds, err := Get(s, user)
		if errors.Is(err, ErrNoUser) || errors.Is(err, ErrInvalid) || errors.Is(err, errUndecodable) {
			continue // deleted meanwhile, emptied, or damaged
		}
		if err != nil {
			return nil, err
		}
		out[user] = creds
	}
	return out, nil
}

// Names returns List's names, sorted.
func Names(all map[string]map[string]Credential) []string {
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Upsert stores c as user's credential for c.Mechanism, replacing any
// earlier one and keeping the user's other mechanisms.
func Upsert(s coord.Store, user string, c Credential) error {
	if err := CheckName(user); err != nil {
		return err
	}
	if _, err := ParseCredential(c.Mechanism, c.Encode()); err != nil {
		return err
	}
	return update(s, user, func(cfg map[string]string) error {
		cfg[c.Mechanism] = c.Encode()
		return nil
	})
}

// Delete removes user's credential for mechanism, or every credential when
// mechanism is empty; ErrNoUser when there was none to remove.
func Delete(s coord.Store, user, mechanism string) error {
	if err := CheckName(user); err != nil {
		return err
	}
	return update(s, user, func(cfg map[string]string) error {
		if mechanism == "" {
			found := false
			for _, m := range Mechanisms {
				if _, ok := cfg[m]; ok {
					delete(cfg, m)
					found = true
				}
			}
			if !found {
				return fmt.Errorf("%w: %q", ErrNoUser, user)
			}
			return nil
		}
		if _, ok := cfg[mechanism]; !ok {
			return fmt.Errorf("%w: %q has no %s credential", ErrNoUser, user, mechanism)
		}
		delete(cfg, mechanism)
		return nil
	})
}

// update applies change to user's config entries and writes the node with
// a change notification in one multi-op, retrying when another writer got
// there first. A user left with no entries loses its node.
func update(s coord.Store, user string, change func(map[string]string) error) error {
	for _, p := range []string{UsersPath, ChangesPath} {
		if err := coord.EnsurePath(s, p); err != nil {
			return err
		}
	}
	path := userPath(user)
	notice, err := json.Marshal(changeNode{Version: 2, EntityPath: "users/" + nodeName(user)})
	if err != nil {
		return err
	}
	for {
		node := userNode{Version: 1, Config: map[string]string{}}
		data, stat, err := s.Get(path)
		exists := err == nil
		switch {
		case errors.Is(err, coord.ErrNoNode):
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(data, &node); err != nil {
				return fmt.Errorf("users: %q: decoding the node: %w", user, err)
			}
			if node.Config == nil {
				node.Config = map[string]string{}
			}
		}
		if err := change(node.Config); err != nil {
			return err
		}
		var write coord.Op
		switch {
		case !exists:
			next, _ := json.Marshal(node)
			write = coord.CreateOp{Path: path, Data: next, Mode: coord.Persistent}
		case len(node.Config) == 0 && stat.NumChildren == 0:
			// A user with user+client quotas (broker/quota) keeps its node.
			write = coord.DeleteOp{Path: path, Version: stat.Version}
		default:
			next, _ := json.Marshal(node)
			write = coord.SetOp{Path: path, Data: next, Version: stat.Version}
		}
		err = s.Multi(write, coord.CreateOp{Path: ChangesPath + "/" + changePrefix, Data: notice, Mode: coord.PersistentSequential})
		if errors.Is(err, coord.ErrBadVersion) || errors.Is(err, coord.ErrNodeExists) || errors.Is(err, coord.ErrNoNode) {
			continue // a concurrent writer: read again
		}
		if err != nil {
			return fmt.Errorf("users: writing %q: %w", user, err)
		}
		return pruneChanges(s)
	}
}

// pruneChanges deletes all but the newest keepChanges notifications.
func pruneChanges(s coord.Store) error {
	names, err := s.Children(ChangesPath)
	if err != nil {
		return err
	}
	var ours []string
	for _, n := range names {
		if strings.HasPrefix(n, changePrefix) {
			ours = append(ours, n)
		}
	}
	// Sequence suffixes are zero-padded, so name order is creation order.
	sort.Strings(ours)
	for len(ours) > keepChanges {
		if err := s.Delete(ChangesPath+"/"+ours[0], coord.AnyVersion); err != nil && !errors.Is(err, coord.ErrNoNode) {
			return err
		}
		ours = ours[1:]
	}
	return nil
}
