package acl

// Storage in the coordination store, in Kafka's ZooKeeper layout, so an
// operator who knows Kafka 2.x finds the ACLs where Kafka kept them:
//
//	/kafka-acl/<ResourceType>/<name>                     LITERAL patterns
//	                                                     (name "*" = every name)
//	/kafka-acl-extended/prefixed/<ResourceType>/<name>   PREFIXED patterns
//
// Each node holds the pattern's entries as JSON:
//
//	{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
//	                      "operation":"Read","host":"*"}]}
//
// A write is a compare-and-set on the node's version (or a create when it
// is missing), retried on a conflict, so two brokers adding ACLs to the same
// resource at once both land. A node left with no entries is deleted.
//
// After every change the writer creates a sequential notification node:
//
//	/kafka-acl-changes/acl_changes_<seq>           data "Topic:orders" (LITERAL)
//	/kafka-acl-extended-changes/acl_changes_<seq>  data {"version":1,
//	      "resourceType":"Topic","name":"ord","patternType":"PREFIXED"}
//
// Every broker watches both parents and re-reads the named resource
// (cache.go). Notifications older than notificationTTL are deleted by
// whichever broker sees them first, as Kafka deletes them after 15 minutes.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"millrace/broker/coord"
)

// Store paths.
const (
	literalRoot         = "/kafka-acl"
	extendedRoot        = "/kafka-acl-extended"
	prefixedRoot        = extendedRoot + "/prefixed"
	literalChangesPath  = "/kafka-acl-changes"
	extendedChangesPath = "/kafka-acl-extended-changes"
	// changePrefix names notification nodes; the store appends the sequence.
	changePrefix = "acl_changes_"
)

// casRetries bounds the compare-and-set loop of a write that keeps losing
// races; each lost race means another writer made progress.
const casRetries = 20

// patternPath is where a pattern's entries are stored.
func patternPath(p Pattern) string {
	if p.PatternType == Prefixed {
		return prefixedRoot + "/" + p.Type.String() + "/" + p.Name
	}
	return literalRoot + "/" + p.Type.String() + "/" + p.Name
}

// storedACL is one entry as Kafka writes it.
type storedACL struct {
	Principal      string `json:"principal"`
	PermissionType string `json:"permissionType"`
	Operation      string `json:"operation"`
	Host           string `json:"host"`
}

type storedACLs struct {
	Version int         `json:"version"`
	ACLs    []storedACL `json:"acls"`
}

// encodeEntries is the JSON of a pattern node.
func encodeEntries(entries []Entry) []byte {
	out := storedACLs{Version: 1, ACLs: make([]storedACL, 0, len(entries))}
	for _, e := range entries {
		out.ACLs = append(out.ACLs, storedACL{e.Principal, e.Permission.String(), e.Operation.String(), e.Host})
	}
	data, _ := json.Marshal(out) // strings only: cannot fail
	return data
}

// decodeEntries reads a pattern node; an entry this version cannot read is
// an error, so a broker never decides on half of a resource's ACLs.
func decodeEntries(data []byte) ([]Entry, error) {
	var in storedACLs
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, err
	}
	if in.Version != 1 {
		return nil, fmt.Errorf("unknown ACL node version %d", in.Version)
	}
	out := make([]Entry, 0, len(in.ACLs))
	for _, a := range in.ACLs {
		op, err := ParseOperation(a.Operation)
		if err != nil {
			return nil, err
		}
		perm, err := ParsePermission(a.PermissionType)
		if err != nil {
			return nil, err
		}
		out = append(out, Entry{Principal: a.Principal, Host: a.Host, Operation: op, Permission: perm})
	}
	return out, nil
}

// notification is the data of a change notification for p.
func notification(p Pattern) (parent string, data []byte) {
	if p.PatternType == Literal {
		return literalChangesPath, []byte(p.Type.String() + ":" + p.Name)
	}
	data, _ = json.Marshal(struct {
		Version      int    `json:"version"`
		ResourceType string `json:"resourceType"`
		Name         string `json:"name"`
		PatternType  string `json:"patternType"`
	}{1, p.Type.String(), p.Name, p.PatternType.String()})
	return extendedChangesPath, data
}

// parseNotification reads a notification's data back into a pattern.
func parseNotification(parent string, data []byte) (Pattern, error) {
	if parent == literalChangesPath {
		typ, name, ok := strings.Cut(string(data), ":")
		if !ok {
			return Pattern{}, fmt.Errorf("notification %q is not Type:name", data)
		}
		t, err := ParseResourceType(typ)
		return Pattern{t, name, Literal}, err
	}
	var n struct {
		ResourceType string `json:"resourceType"`
		Name         string `json:"name"`
		PatternType  string `json:"patternType"`
	}
	if err := json.Unmarshal(data, &n); err != nil {
		return Pattern{}, err
	}
	t, err := ParseResourceType(n.ResourceType)
	if err != nil {
		return Pattern{}, err
	}
	pt, err := ParsePatternType(n.PatternType)
	return Pattern{t, n.Name, pt}, err
}

// ensurePaths creates the parents of every ACL and notification node.
func ensurePaths(store coord.Store) error {
	paths := []string{literalRoot, extendedRoot, prefixedRoot, literalChangesPath, extendedChangesPath}
	for t := range resourceTypeNames {
		paths = append(paths, literalRoot+"/"+t.String(), prefixedRoot+"/"+t.String())
	}
	for _, p := range paths {
		if _, err := store.Create(p, nil, coord.Persistent); err != nil && !errors.Is(err, coord.ErrNodeExists) {
			return fmt.Errorf("acl: creating %s: %w", p, err)
		}
	}
	return nil
}

// readPattern reads one pattern's entries; none when the node is missing.
func readPattern(store coord.Store, p Pattern) ([]Entry, int32, error) {
	data, stat, err := store.Get(patternPath(p))
	if errors.Is(err, coord.ErrNoNode) {
		return nil, -1, nil
	}
	if err != nil {
		return nil, 0, err
	}
	entries, err := decodeEntries(data)
	if err != nil {
		return nil, 0, fmt.Errorf("acl: %s: %w", patternPath(p), err)
	}
	return entries, stat.Version, nil
}

// readAll reads every stored ACL.
func readAll(store coord.Store) (map[Pattern][]Entry, error) {
	out := map[Pattern][]Entry{}
	for t := range resourceTypeNames {
		for _, pt := range []PatternType{Literal, Prefixed} {
			parent := literalRoot + "/" + t.String()
			if pt == Prefixed {
				parent = prefixedRoot + "/" + t.String()
			}
			names, err := store.Children(parent)
			if errors.Is(err, coord.ErrNoNode) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, name := range names {
				p := Pattern{t, name, pt}
				entries, _, err := readPattern(store, p)
				if err != nil {
					return nil, err
				}
				if len(entries) > 0 {
					out[p] = entries
				}
			}
		}
	}
	return out, nil
}

// update rewrites one pattern's entries with change (which returns the new
// entries and whether anything changed) under compare-and-set, then
// notifies every broker when something changed.
func update(store coord.Store, p Pattern, change func([]Entry) ([]Entry, bool)) error {
	if err := ensurePaths(store); err != nil {
		return err
	}
	path := patternPath(p)
	for range casRetries {
		old, version, err := readPattern(store, p)
		if err != nil {
			return err
		}
		entries, changed := change(old)
		if !changed {
			return nil
		}
		switch {
		case version < 0:
			_, err = store.Create(path, encodeEntries(entries), coord.Persistent)
		case len(entries) == 0:
			err = store.Delete(path, version)
		default:
			_, err = store.Set(path, encodeEntries(entries), version)
		}
		if errors.Is(err, coord.ErrNodeExists) || errors.Is(err, coord.ErrBadVersion) || errors.Is(err, coord.ErrNoNode) {
			continue // another writer got there first: read again
		}
		if err != nil {
			return fmt.Errorf("acl: writing %s: %w", path, err)
		}
		parent, data := notification(p)
		if _, err := store.Create(parent+"/"+changePrefix, data, coord.PersistentSequential); err != nil {
			return fmt.Errorf("acl: notifying the change of %s: %w", path, err)
		}
		return nil
	}
	return fmt.Errorf("acl: writing %s: still conflicting after %d attempts", path, casRetries)
}

// Add stores bindings, each once (an ACL already present is not repeated).
// It returns one error per binding, nil where it was stored.
func Add(store coord.Store, bindings []Binding) []error {
	errs := make([]error, len(bindings))
	for i, b := range bindings {
		if err := b.Validate(); err != nil {
			errs[i] = err
			continue
		}
		errs[i] = update(store, b.Pattern, func(old []Entry) ([]Entry, bool) {
			for _, e := range old {
				if e == b.Entry {
					return old, false
				}
			}
			return append(old[:len(old):len(old)], b.Entry), true
		})
	}
	return errs
}

// Remove deletes the stored ACLs each filter selects, reading the store
// (not a cache) so that it removes what is there. It returns, per filter,
// the bindings removed and an error.
func Remove(store coord.Store, filters []Filter) ([][]Binding, []error) {
	removed := make([][]Binding, len(filters))
	errs := make([]error, len(filters))
	all, err := readAll(store)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return removed, errs
	}
	for i, f := range filters {
		for p := range all {
			if !f.MatchesPattern(p) {
				continue
			}
			var gone []Binding
			err := update(store, p, func(old []Entry) ([]Entry, bool) {
				gone = gone[:0]
				keep := make([]Entry, 0, len(old))
				for _, e := range old {
					if f.MatchesEntry(e) {
						gone = append(gone, Binding{p, e})
					} else {
						keep = append(keep, e)
					}
				}
				return keep, len(gone) > 0
			})
			if err != nil {
				errs[i] = err
				break
			}
			removed[i] = append(removed[i], gone...)
		}
		sortBindings(removed[i])
	}
	return removed, errs
}
