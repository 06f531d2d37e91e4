package kafka

// Authorization. With authorizer.class.name set, every request is checked
// against the ACLs (broker/acl) the way Kafka's handlers check them: one
// call to b.authorized per resource a request touches, with the
// connection's principal and host. The ACLs come from a cache each broker
// keeps in step with the coordination store (Broker.authorizer, below);
// CreateAcls and DeleteAcls write the store.
//
// Without an authorizer everything is allowed, as in Kafka.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/internal/settings"
)

// Names accepted for authorizer.class.name: Kafka's two ACL authorizers
// (ZooKeeper-backed and KRaft) and millrace's own; all three mean the same
// authorizer, with ACLs in the coordination store.
var authorizerNames = []string{
	"kafka.security.authorizer.AclAuthorizer",
	"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
	"millrace",
}

// AuthorizerConfig holds the authorizer's settings.
type AuthorizerConfig struct {
	// ClassName (authorizer.class.name, default empty = no authorizer:
	// every request allowed, the ACL APIs answer SECURITY_DISABLED) turns
	// ACLs on: kafka.security.authorizer.AclAuthorizer,
	// org.apache.kafka.metadata.authorizer.StandardAuthorizer or millrace.
	ClassName string
	// SuperUsers (super.users, default empty) are principals allowed
	// everything whatever the ACLs say, separated by semicolons as in
	// Kafka: "User:admin;User:broker". The brokers' own principal belongs
	// here (or needs ClusterAction on the cluster) for replication.
	SuperUsers string
	// AllowEveryoneIfNoACLFound (allow.everyone.if.no.acl.found, default
	// false) allows any principal to act on a resource no ACL applies to.
	AllowEveryoneIfNoACLFound bool
}

// enabled reports whether an authorizer is configured.
func (a AuthorizerConfig) enabled() bool { return a.ClassName != "" }

func (a AuthorizerConfig) validate() []error {
	var errs []error
	if a.ClassName != "" {
		known := false
		for _, n := range authorizerNames {
			known = known || a.ClassName == n
		}
		if !known {
			errs = append(errs, fmt.Errorf("authorizer.class.name %q is not one millrace provides: use %s, or leave it empty for no authorization", a.ClassName, strings.Join(authorizerNames, ", ")))
		}
	}
	for _, p := range acl.ParseSuperUsers(a.SuperUsers) {
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			errs = append(errs, fmt.Errorf("super.users: %q is not a principal of the form User:name (principals are separated by ';')", p))
		}
	}
	return errs
}

// authorizerSettings are the ACL settings, part of Settings.
var authorizerSettings = settings.NewList(settingError,
	settings.Setting[Config]{Name: "authorizer.class.name", Type: settings.String, Doc: "the ACL authorizer; empty: none, everything is allowed",
		Parse:  func(c *Config, v string) error { c.Authorizer.ClassName = strings.TrimSpace(v); return nil },
		Format: func(c Config) string { return c.Authorizer.ClassName },
	},
	settings.Str("super.users", settings.String, "principals every ACL allows, `User:a;User:b`", func(c *Config) *string { return &c.Authorizer.SuperUsers }),
	boolean("allow.everyone.if.no.acl.found", "a resource without ACLs is open to all", func(c *Config) *bool { return &c.Authorizer.AllowEveryoneIfNoACLFound }),
)

// authorizer is the broker's ACL cache and settings (Broker.authorizer); nil
// when no authorizer is configured.
type authorizer struct {
	cache    *acl.Cache
	settings acl.Settings
}

func (a *authorizer) Close() error { return a.cache.Close() }

// openAuthorizer opens b's authorizer; nil when authorization is off.
func openAuthorizer(b *Broker) (*authorizer, error) {
	if !b.cfg.Authorizer.enabled() {
		return nil, nil
	}
	if b.store == nil {
		return nil, errors.New("authorizer.class.name is set but the broker has no coordination store to keep ACLs in")
	}
	cache, err := acl.OpenCache(b.store, b.logger)
	if err != nil {
		return nil, err
	}
	return &authorizer{cache: cache, settings: acl.Settings{
		SuperUsers:   acl.ParseSuperUsers(b.cfg.Authorizer.SuperUsers),
		AllowIfNoACL: b.cfg.Authorizer.AllowEveryoneIfNoACLFound,
	}}, nil
}

// authorized reports whether r's principal may perform op on the resource
// typ/name. Without an authorizer everything is allowed. A denial is logged
// at Debug.
func (b *Broker) authorized(r *request, typ acl.ResourceType, name string, op acl.Operation) bool {
	ok := b.allowed(r, typ, name, op)
	if !ok {
		r.conn.logger.Debug("authorization denied", "principal", r.conn.principal, "operation", op.String(), "resource_type", typ.String(), "resource", name, "api_key", r.key)
	}
	return ok
}

// allowed is authorized without the log line, for questions that are not
// a request's check (authorized operations, filters).
func (b *Broker) allowed(r *request, typ acl.ResourceType, name string, op acl.Operation) bool {
	a := b.authorizer
	if a == nil {
		return true
	}
	return a.cache.Snapshot().Authorize(a.settings, r.conn.principal, r.conn.host, op, typ, name)
}

// authorizedCluster is authorized on the one Cluster resource.
func (b *Broker) authorizedCluster(r *request, op acl.Operation) bool {
	return b.authorized(r, acl.Cluster, acl.ClusterName, op)
}

// authorizedAny reports whether r's principal may perform op on some
// resource of type typ (Kafka's authorizeByResourceType).
func (b *Broker) authorizedAny(r *request, typ acl.ResourceType, op acl.Operation) bool {
	a := b.authorizer
	if a == nil {
		return true
	}
	return a.cache.Snapshot().AnyAllowed(a.settings, r.conn.principal, r.conn.host, op, typ)
}

// mayCreateTopic: creating a topic needs Create on the cluster or on the
// topic (Kafka 2.0 on).
func (b *Broker) mayCreateTopic(r *request, name string) bool {
	return b.allowed(r, acl.Cluster, acl.ClusterName, acl.Create) || b.authorized(r, acl.Topic, name, acl.Create)
}

// metadataTopicDenied reports whether a Metadata request naming topic must
// get TOPIC_AUTHORIZATION_FAILED: the principal may not Describe it, or it
// is missing, would be auto-created and the principal may not create it.
func (b *Broker) metadataTopicDenied(r *request, name string, autoCreate bool) bool {
	if b.authorizer == nil {
		return false
	}
	if !b.authorized(r, acl.Topic, name, acl.Describe) {
		return true
	}
	if _, exists := b.cluster.Topic(name); !exists && autoCreate {
		return !b.mayCreateTopic(r, name)
	}
	return false
}

// authorizeMetadata finishes a Metadata response with an authorizer on: an
// all-topics answer loses the topics the principal may not Describe, a
// topic named by ID that it may not Describe becomes TOPIC_AUTHORIZATION_FAILED
// (with no name, so its existence is not confirmed), and the authorized
// operations asked for are the ones the ACLs allow. Topics named by name
// were checked before lookup (metadataTopicDenied).
func (b *Broker) authorizeMetadata(r *request, req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	if b.authorizer == nil {
		return
	}
	allTopics := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
	kept := resp.Topics[:0]
	for _, t := range resp.Topics {
		if t.ErrorCode == 0 && t.Topic != nil && !b.allowed(r, acl.Topic, *t.Topic, acl.Describe) {
			if allTopics {
				continue
			}
			denied := kmsg.NewMetadataResponseTopic()
			denied.TopicID, denied.ErrorCode = t.TopicID, kerr.TopicAuthorizationFailed.Code
			t = denied
		}
		if req.IncludeTopicAuthorizedOperations && t.ErrorCode == 0 && t.Topic != nil {
			t.AuthorizedOperations = b.authorizedOperations(r, acl.Topic, *t.Topic, topicOperations)
		}
		kept = append(kept, t)
	}
	resp.Topics = kept
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = b.authorizedOperations(r, acl.Cluster, acl.ClusterName, clusterOperations)
	}
}

// authorizedOperations is the KIP-430 bit set of the operations in ops
// that the principal may perform on typ/name.
func (b *Broker) authorizedOperations(r *request, typ acl.ResourceType, name string, ops int32) int32 {
	var out int32
	for op := acl.All; op <= acl.IdempotentWrite; op++ {
		if ops&(1<<op) != 0 && b.allowed(r, typ, name, op) {
			out |= 1 << op
		}
	}
	return out
}

// configResourceDenied checks a DescribeConfigs or AlterConfigs resource:
// op on the topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker or broker
// logger, on the cluster (CLUSTER_AUTHORIZATION_FAILED). It returns 0 when
// allowed, and for resource types the handler refuses anyway.
func (b *Broker) configResourceDenied(r *request, typ kmsg.ConfigResourceType, name string, op acl.Operation) int16 {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if !b.authorized(r, acl.Topic, name, op) {
			return kerr.TopicAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !b.authorizedCluster(r, op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	}
	return 0
}
