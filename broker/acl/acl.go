// Package acl is millrace's authorizer: Kafka's ACL model (resources,
// patterns, operations, Allow/Deny per principal and host), the decision
// function over an immutable snapshot of the ACLs, their storage in the
// coordination store in Kafka's ZooKeeper layout, and the cache every broker
// keeps in step with the store through change notifications.
//
// The decision (Snapshot.Authorize) is pure: no I/O, no clock, so every rule
// is golden-tested (acl_test.go). Its rules are Kafka's AclAuthorizer's:
//   - a super user (super.users) may do anything;
//   - the ACLs that apply to a resource are the LITERAL ones naming it, the
//     LITERAL ones named "*" and the PREFIXED ones whose name starts it;
//   - when none applies (to any principal), allow.everyone.if.no.acl.found
//     decides;
//   - otherwise a matching Deny wins over any Allow, and without a matching
//     Allow the request is denied. An ACL matches when its principal is the
//     caller's or "User:*", its host the caller's or "*", and its operation
//     the one asked for or All; an Allow of Read, Write, Delete or Alter also
//     allows Describe, and an Allow of AlterConfigs allows DescribeConfigs.
package acl

import (
	"fmt"
	"strings"
)

// ResourceType is a kind of resource, with Kafka's wire values.
type ResourceType int8

// The resource types millrace authorizes (Kafka's wire values).
const (
	AnyResource     ResourceType = 1 // filters only
	Topic           ResourceType = 2
	Group           ResourceType = 3
	Cluster         ResourceType = 4
	TransactionalID ResourceType = 5
)

// ClusterName is the name of the one Cluster resource, as in Kafka.
const ClusterName = "kafka-cluster"

// Wildcard is the LITERAL resource name, principal and host that match any.
const Wildcard = "*"

// WildcardPrincipal matches every principal.
const WildcardPrincipal = "User:*"

// resourceTypeNames are Kafka's names, used in store paths and JSON.
var resourceTypeNames = map[ResourceType]string{
	Topic: "Topic", Group: "Group", Cluster: "Cluster", TransactionalID: "TransactionalId",
}

func (t ResourceType) String() string {
	if n, ok := resourceTypeNames[t]; ok {
		return n
	}
	if t == AnyResource {
		return "Any"
	}
	return fmt.Sprintf("ResourceType(%d)", int8(t))
}

// Concrete reports whether t names a resource (not Any, not unknown).
func (t ResourceType) Concrete() bool { _, ok := resourceTypeNames[t]; return ok }

// ParseResourceType reads a resource type name ("Topic", "topic",
// "TransactionalId", ...).
func ParseResourceType(s string) (ResourceType, error) {
	for t, n := range resourceTypeNames {
		if strings.EqualFold(n, s) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("acl: unknown resource type %q (Topic, Group, Cluster or TransactionalId)", s)
}

// PatternType says how a pattern's name matches resource names.
type PatternType int8

// Pattern types (Kafka's wire values).
const (
	AnyPattern   PatternType = 1 // filters only: any pattern type
	MatchPattern PatternType = 2 // filters only: patterns that would match the name
	Literal      PatternType = 3
	Prefixed     PatternType = 4
)

func (p PatternType) String() string {
	switch p {
	case AnyPattern:
		return "ANY"
	case MatchPattern:
		return "MATCH"
	case Literal:
		return "LITERAL"
	case Prefixed:
		return "PREFIXED"
	}
	return fmt.Sprintf("PatternType(%d)", int8(p))
}

// ParsePatternType reads "literal" or "prefixed" (any case).
func ParsePatternType(s string) (PatternType, error) {
	switch strings.ToUpper(s) {
	case "LITERAL":
		return Literal, nil
	case "PREFIXED":
		return Prefixed, nil
	}
	return 0, fmt.Errorf("acl: unknown resource pattern type %q (literal or prefixed)", s)
}

// Operation is what a request does to a resource (Kafka's wire values).
type Operation int8

// Operations (Kafka's wire values).
const (
	AnyOperation    Operation = 1 // filters only
	All             Operation = 2
	Read            Operation = 3
	Write           Operation = 4
	Create          Operation = 5
	Delete          Operation = 6
	Alter           Operation = 7
	Describe        Operation = 8
	ClusterAction   Operation = 9
	DescribeConfigs Operation = 10
	AlterConfigs    Operation = 11
	IdempotentWrite Operation = 12
)

var operationNames = map[Operation]string{
	All: "All", Read: "Read", Write: "Write", Create: "Create", Delete: "Delete",
	Alter: "Alter", Describe: "Describe", ClusterAction: "ClusterAction",
	DescribeConfigs: "DescribeConfigs", AlterConfigs: "AlterConfigs",
	IdempotentWrite: "IdempotentWrite",
}

func (o Operation) String() string {
	if n, ok := operationNames[o]; ok {
		return n
	}
	if o == AnyOperation {
		return "Any"
	}
	return fmt.Sprintf("Operation(%d)", int8(o))
}

// Concrete reports whether o is an operation an ACL can name.
func (o Operation) Concrete() bool { _, ok := operationNames[o]; return ok }

// ParseOperation reads an operation name ("Read", "describeconfigs",
// "DESCRIBE_CONFIGS", ...).
func ParseOperation(s string) (Operation, error) {
	flat := strings.ReplaceAll(s, "_", "")
	for o, n := range operationNames {
		if strings.EqualFold(n, flat) {
			return o, nil
		}
	}
	return 0, fmt.Errorf("acl: unknown operation %q", s)
}

// Permission is Allow or Deny (Kafka's wire values).
type Permission int8

// Permissions (Kafka's wire values).
const (
	AnyPermission Permission = 1 // filters only
	Deny          Permission = 2
	Allow         Permission = 3
)

func (p Permission) String() string {
	switch p {
	case Deny:
		return "Deny"
	case Allow:
		return "Allow"
	case AnyPermission:
		return "Any"
	}
	return fmt.Sprintf("Permission(%d)", int8(p))
}

// ParsePermission reads "Allow" or "Deny" (any case).
func ParsePermission(s string) (Permission, error) {
	switch strings.ToLower(s) {
	case "allow":
		return Allow, nil
	case "deny":
		return Deny, nil
	}
	return 0, fmt.Errorf("acl: unknown permission type %q (Allow or Deny)", s)
}

// Pattern is the resource side of an ACL: a type, a name and how the name
// matches.
type Pattern struct {
	Type        ResourceType
	Name        string
	PatternType PatternType
}

func (p Pattern) String() string {
	return p.Type.String() + ":" + p.PatternType.String() + ":" + p.Name
}

// Entry is the access side of an ACL: who, from where, what, allowed or not.
type Entry struct {
	Principal  string
	Host       string
	Operation  Operation
	Permission Permission
}

// Binding is one ACL: a pattern and an entry.
type Binding struct {
	Pattern Pattern
	Entry   Entry
}

// Validate checks that a binding can be stored: concrete types, a principal
// of the form "Type:name", a name that is a store path component, and the
// Cluster resource named kafka-cluster.
func (b Binding) Validate() error {
	p, e := b.Pattern, b.Entry
	switch {
	case !p.Type.Concrete():
		return fmt.Errorf("resource type %v cannot be stored", p.Type)
	case p.PatternType != Literal && p.PatternType != Prefixed:
		return fmt.Errorf("pattern type %v cannot be stored: use LITERAL or PREFIXED", p.PatternType)
	case !e.Operation.Concrete():
		return fmt.Errorf("operation %v cannot be stored", e.Operation)
	case e.Permission != Allow && e.Permission != Deny:
		return fmt.Errorf("permission type %v cannot be stored: use Allow or Deny", e.Permission)
	case p.Type == Cluster && p.Name != ClusterName:
		return fmt.Errorf("the cluster resource is named %q, not %q", ClusterName, p.Name)
	case p.PatternType == Prefixed && p.Name == Wildcard:
		return fmt.Errorf("a PREFIXED pattern cannot be named %q: use LITERAL %q for every name", Wildcard, Wildcard)
	case e.Host == "":
		return fmt.Errorf("empty host: use %q for any host", Wildcard)
	}
	if err := validName(p.Name); err != nil {
		return err
	}
	if typ, name, ok := strings.Cut(e.Principal, ":"); !ok || typ == "" || name == "" {
		return fmt.Errorf("principal %q is not of the form User:name", e.Principal)
	}
	return nil
}

// validName checks that a resource name is one store path component.
func validName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty resource name")
	case name == "." || name == "..":
		return fmt.Errorf("resource name %q is not allowed", name)
	case strings.Contains(name, "/"):
		return fmt.Errorf("resource name %q contains '/', which the store cannot hold", name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("resource name %q contains a control character", name)
		}
	}
	return nil
}
