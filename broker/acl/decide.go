package acl

import (
	"sort"
	"strings"
)

// Settings are the authorizer's broker settings.
type Settings struct {
	// SuperUsers (super.users) may do anything, whatever the ACLs say.
	SuperUsers []string
	// AllowIfNoACL (allow.everyone.if.no.acl.found) allows every request on
	// a resource that no ACL applies to.
	AllowIfNoACL bool
}

// ParseSuperUsers splits Kafka's super.users: principals separated by
// semicolons ("User:admin;User:broker"). Commas are not separators because a
// certificate subject principal contains them.
func ParseSuperUsers(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Snapshot is an immutable set of ACLs, indexed for decisions. The zero
// value (and nil) holds none.
type Snapshot struct {
	// acls holds every pattern's entries; a pattern with none is absent.
	acls map[Pattern][]Entry
	// prefixLengths lists, per resource type, the distinct lengths of the
	// PREFIXED pattern names, ascending: a decision looks up the name's
	// prefixes of those lengths instead of testing every pattern.
	prefixLengths map[ResourceType][]int
}

// NewSnapshot indexes the ACLs of each pattern. The map is kept, not
// copied: the caller must not change it afterwards.
func NewSnapshot(acls map[Pattern][]Entry) *Snapshot {
	s := &Snapshot{acls: acls, prefixLengths: map[ResourceType][]int{}}
	seen := map[ResourceType]map[int]bool{}
	for p, entries := range acls {
		if len(entries) == 0 {
			delete(acls, p)
			continue
		}
		if p.PatternType == Prefixed && !seen[p.Type][len(p.Name)] {
			if seen[p.Type] == nil {
				seen[p.Type] = map[int]bool{}
			}
			seen[p.Type][len(p.Name)] = true
			s.prefixLengths[p.Type] = append(s.prefixLengths[p.Type], len(p.Name))
		}
	}
	for _, lengths := range s.prefixLengths {
		sort.Ints(lengths)
	}
	return s
}

// Patterns returns every pattern holding ACLs, with its entries; the result
// must not be changed.
func (s *Snapshot) Patterns() map[Pattern][]Entry {
	if s == nil {
		return nil
	}
	return s.acls
}

// Authorize decides whether principal, connected from host, may perform op
// on the resource typ/name. See the package comment for the rules. It
// allocates nothing: a Produce or Fetch asks once per topic.
func (s *Snapshot) Authorize(set Settings, principal, host string, op Operation, typ ResourceType, name string) bool {
	for _, su := range set.SuperUsers {
		if su == principal {
			return true
		}
	}
	if s == nil {
		return set.AllowIfNoACL
	}
	found, allowed := false, false
	// judge reads one applicable pattern's entries; it reports false when
	// a Deny decides.
	judge := func(entries []Entry) bool {
		if len(entries) == 0 {
			return true
		}
		found = true
		for _, e := range entries {
			if !e.matchesWho(principal, host) {
				continue
			}
			switch e.Permission {
			case Deny:
				// Deny wins, and only for the operation it names (or All):
				// a Deny of Read does not deny Describe.
				if e.Operation == op || e.Operation == All {
					return false
				}
			case Allow:
				allowed = allowed || e.Operation.allows(op)
			}
		}
		return true
	}
	if !judge(s.acls[Pattern{typ, name, Literal}]) {
		return false
	}
	if name != Wildcard && !judge(s.acls[Pattern{typ, Wildcard, Literal}]) {
		return false
	}
	for _, n := range s.prefixLengths[typ] {
		if n > len(name) {
			break
		}
		if !judge(s.acls[Pattern{typ, name[:n], Prefixed}]) {
			return false
		}
	}
	if !found {
		return set.AllowIfNoACL
	}
	return allowed
}

// AnyAllowed reports whether principal may perform op on some resource of
// type typ: the question Kafka asks when an idempotent producer has no
// IdempotentWrite on the cluster but may Write some topic (KIP-679). It
// looks for an Allow that applies to the principal on some pattern of the
// type, unless a Deny of the wildcard name takes every name away. With no
// ACLs at all, allow.everyone.if.no.acl.found decides.
func (s *Snapshot) AnyAllowed(set Settings, principal, host string, op Operation, typ ResourceType) bool {
	for _, su := range set.SuperUsers {
		if su == principal {
			return true
		}
	}
	if s == nil || len(s.acls) == 0 {
		return set.AllowIfNoACL
	}
	// A Deny of the wildcard name covers every name.
	for _, e := range s.acls[Pattern{typ, Wildcard, Literal}] {
		if e.Permission == Deny && e.matchesWho(principal, host) && (e.Operation == op || e.Operation == All) {
			return false
		}
	}
	for p, entries := range s.acls {
		if p.Type != typ {
			continue
		}
		for _, e := range entries {
			if e.Permission == Allow && e.matchesWho(principal, host) && e.Operation.allows(op) {
				return true
			}
		}
	}
	return false
}

// matchesWho reports whether the entry applies to principal at host.
func (e Entry) matchesWho(principal, host string) bool {
	return (e.Principal == principal || e.Principal == WildcardPrincipal) &&
		(e.Host == host || e.Host == Wildcard)
}

// allows reports whether an Allow of o allows op: All allows everything,
// Read/Write/Delete/Alter imply Describe, AlterConfigs implies
// DescribeConfigs (Kafka's implied operations).
func (o Operation) allows(op Operation) bool {
	if o == op || o == All {
		return true
	}
	switch op {
	case Describe:
		return o == Read || o == Write || o == Delete || o == Alter
	case DescribeConfigs:
		return o == AlterConfigs
	}
	return false
}

// Filter selects ACLs for DescribeAcls and DeleteAcls, as Kafka's
// AclBindingFilter: a nil name, principal or host matches any; the Any
// values match any type, operation or permission; pattern type MATCH
// selects the patterns that apply to the named resource.
type Filter struct {
	Type        ResourceType
	Name        *string
	PatternType PatternType
	Principal   *string
	Host        *string
	Operation   Operation
	Permission  Permission
}

// MatchesPattern reports whether the filter's resource side selects p.
func (f Filter) MatchesPattern(p Pattern) bool {
	if f.Type != AnyResource && f.Type != p.Type {
		return false
	}
	if f.PatternType != AnyPattern && f.PatternType != MatchPattern && f.PatternType != p.PatternType {
		return false
	}
	if f.Name == nil {
		return true
	}
	if f.PatternType != MatchPattern {
		return *f.Name == p.Name
	}
	if p.PatternType == Prefixed {
		return strings.HasPrefix(*f.Name, p.Name)
	}
	return *f.Name == p.Name || p.Name == Wildcard
}

// MatchesEntry reports whether the filter's access side selects e.
func (f Filter) MatchesEntry(e Entry) bool {
	return (f.Principal == nil || *f.Principal == e.Principal) &&
		(f.Host == nil || *f.Host == e.Host) &&
		(f.Operation == AnyOperation || f.Operation == e.Operation) &&
		(f.Permission == AnyPermission || f.Permission == e.Permission)
}

// Select returns the bindings the filter selects, sorted by pattern.
func (s *Snapshot) Select(f Filter) []Binding {
	var out []Binding
	for p, entries := range s.Patterns() {
		if !f.MatchesPattern(p) {
			continue
		}
		for _, e := range entries {
			if f.MatchesEntry(e) {
				out = append(out, Binding{p, e})
			}
		}
	}
	sortBindings(out)
	return out
}

func sortBindings(b []Binding) {
	sort.Slice(b, func(i, j int) bool {
		pi, pj := b[i].Pattern, b[j].Pattern
		if pi != pj {
			if pi.Type != pj.Type {
				return pi.Type < pj.Type
			}
			if pi.PatternType != pj.PatternType {
				return pi.PatternType < pj.PatternType
			}
			return pi.Name < pj.Name
		}
		ei, ej := b[i].Entry, b[j].Entry
		if ei.Principal != ej.Principal {
			return ei.Principal < ej.Principal
		}
		if ei.Host != ej.Host {
			return ei.Host < ej.Host
		}
		if ei.Operation != ej.Operation {
			return ei.Operation < ej.Operation
		}
		return ei.Permission < ej.Permission
	})
}
