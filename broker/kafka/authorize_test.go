package kafka

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

// withAuthorizer turns ACLs on; super lists the super users.
func withAuthorizer(super string) func(*testOptions) {
	return withConfig(func(c *Config) {
		c.Authorizer = AuthorizerConfig{ClassName: "kafka.security.authorizer.AclAuthorizer", SuperUsers: super}
	})
}

// grant stores ACLs for the test connection's principal (User:ANONYMOUS)
// straight into the coordination store, as another broker would.
func grant(t *testing.T, tb *testBroker, bindings ...acl.Binding) {
	t.Helper()
	for i := range bindings {
		if bindings[i].Entry.Principal == "" {
			bindings[i].Entry.Principal = anonymous
		}
		if bindings[i].Entry.Host == "" {
			bindings[i].Entry.Host = acl.Wildcard
		}
		if bindings[i].Entry.Permission == 0 {
			bindings[i].Entry.Permission = acl.Allow
		}
	}
	for _, err := range acl.Add(tb.store, bindings) {
		if err != nil {
			t.Fatal(err)
		}
	}
	a := tb.broker.authorizer
	var patterns []acl.Pattern
	for _, b := range bindings {
		patterns = append(patterns, b.Pattern)
	}
	if err := a.cache.Refresh(patterns); err != nil {
		t.Fatal(err)
	}
}

func topicACL(name string, op acl.Operation) acl.Binding {
	return acl.Binding{Pattern: acl.Pattern{Type: acl.Topic, Name: name, PatternType: acl.Literal}, Entry: acl.Entry{Operation: op}}
}

func clusterACL(op acl.Operation) acl.Binding {
	return acl.Binding{Pattern: acl.Pattern{Type: acl.Cluster, Name: acl.ClusterName, PatternType: acl.Literal}, Entry: acl.Entry{Operation: op}}
}

func TestAuthorizerConfig(t *testing.T) {
	c := DefaultConfig()
	for name, value := range map[string]string{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users": "User:admin;User:CN=broker,O=x", "allow.everyone.if.no.acl.found": "true"} {
		if err := c.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.Values()["super.users"]; got != "User:admin;User:CN=broker,O=x" {
		t.Errorf("super.users = %q", got)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Authorizer.ClassName = "com.example.Mine" },
		func(c *Config) { c.Authorizer.SuperUsers = "admin" },
	} {
		c := DefaultConfig()
		bad(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: want a validation error", c.Authorizer)
		}
	}
}

// TestACLAPIs: CreateAcls, DescribeAcls and DeleteAcls through kadm, as a
// super user.
func TestACLAPIs(t *testing.T) {
	tb := startBroker(t, withAuthorizer(anonymous))
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	b := kadm.NewACLs().Topics("orders").Groups("sink").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow("User:alice").AllowHosts().Operations(kadm.OpRead, kadm.OpDescribe)
	created, err := adm.CreateACLs(ctx, b)
	if err != nil || len(created) != 4 {
		t.Fatalf("CreateACLs: %v %+v", err, created)
	}
	for _, c := range created {
		if c.Err != nil {
			t.Fatalf("CreateACLs: %+v", c)
		}
	}
	if _, _, err := tb.store.Get("/kafka-acl-extended/prefixed/Topic/orders"); err != nil {
		t.Errorf("the prefixed topic ACL is not at Kafka's path: %v", err)
	}
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternMatch).Allow().AllowHosts().Operations(kadm.OpAny))
	if err != nil || len(described) != 1 || described[0].Err != nil || len(described[0].Described) != 4 {
		t.Fatalf("DescribeACLs: %v %+v", err, described)
	}
	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics("orders").ResourcePatternType(kadm.ACLPatternPrefixed).Allow().AllowHosts().Operations(kadm.OpRead))
	if err != nil || len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs: %v %+v", err, deleted)
	}
	bad, err := adm.CreateACLs(ctx, kadm.NewACLs().Clusters().Allow("alice").AllowHosts().Operations(kadm.OpAlter))
	if err != nil || len(bad) != 1 || !errors.Is(bad[0].Err, kerr.InvalidRequest) {
		t.Errorf("a principal without a type: %v %+v, want INVALID_REQUEST", err, bad)
	}
}

// TestACLAPIsNeedCluster: without Alter/Describe on the cluster the ACL
// APIs answer CLUSTER_AUTHORIZATION_FAILED.
func TestACLAPIsNeedCluster(t *testing.T) {
	tb := startBroker(t, withAuthorizer(""))
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("t").Allow("User:me").AllowHosts().Operations(kadm.OpAll))
	if err != nil || len(created) != 1 || !errors.Is(created[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("CreateACLs: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, created)
	}
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny))
	if err != nil || len(described) != 1 || !errors.Is(described[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("DescribeACLs: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, described)
	}
}

// TestTopicAuthorization: Write on topic a but not b; Metadata hides b;
// Fetch on b is refused; a group without Read is refused.
func TestTopicAuthorization(t *testing.T) {
	tb := startBroker(t, withAuthorizer(""))
	grant(t, tb, clusterACL(acl.Create), topicACL("a", acl.Write), topicACL("a", acl.Read))
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "a", "b"); err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, tb.addr, kgo.DefaultProduceTopic("a"), kgo.MetadataMinAge(10e6))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce to a: %v", err)
	}
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "b", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to b: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	c := dial(t, tb.addr)
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 9
	resp := c.roundTrip(meta, 1).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "a" {
		t.Errorf("all-topics Metadata lists %+v, want only a", resp.Topics)
	}
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("b")}, {Topic: kmsg.StringPtr("c")}}
	meta.AllowAutoTopicCreation = true
	resp = c.roundTrip(meta, 2).(*kmsg.MetadataResponse)
	for _, topic := range resp.Topics {
		if topic.ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Errorf("Metadata for %s: error %d, want TOPIC_AUTHORIZATION_FAILED", *topic.Topic, topic.ErrorCode)
		}
	}
	if _, ok := tb.cluster.Topic("c"); ok {
		t.Error("a principal without Create auto-created topic c")
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.ReplicaID, fetch.MaxBytes = 11, -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "b"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fr := c.roundTrip(fetch, 3).(*kmsg.FetchResponse)
	if code := fr.Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("Fetch of b: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 5, "g", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if jr := c.roundTrip(join, 4).(*kmsg.JoinGroupResponse); jr.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("JoinGroup without Read on the group: error %d, want GROUP_AUTHORIZATION_FAILED", jr.ErrorCode)
	}
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.Version, find.CoordinatorKey = 2, "g"
	if fc := c.roundTrip(find, 5).(*kmsg.FindCoordinatorResponse); fc.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("FindCoordinator without Describe on the group: error %d, want GROUP_AUTHORIZATION_FAILED", fc.ErrorCode)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 2, "g", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "a", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if oc := c.roundTrip(commit, 6).(*kmsg.OffsetCommitResponse); oc.Topics[0].Partitions[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("OffsetCommit without Read on the group: %+v, want GROUP_AUTHORIZATION_FAILED", oc.Topics)
	}
	// With Read on the group, the topic it may not Read is refused and
	// the other committed.
	grant(t, tb, acl.Binding{Pattern: acl.Pattern{Type: acl.Group, Name: "g", PatternType: acl.Literal}, Entry: acl.Entry{Operation: acl.Read}})
	commit.Topics = append(commit.Topics, kmsg.OffsetCommitRequestTopic{Topic: "b", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}})
	oc := c.roundTrip(commit, 7).(*kmsg.OffsetCommitResponse)
	codes := map[string]int16{}
	for _, topic := range oc.Topics {
		codes[topic.Topic] = topic.Partitions[0].ErrorCode
	}
	if codes["a"] != 0 || codes["b"] != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("OffsetCommit codes %v, want a committed and b TOPIC_AUTHORIZATION_FAILED", codes)
	}

	describe := kmsg.NewPtrDescribeConfigsRequest()
	describe.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "a"}, {ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0"}}
	dc := c.roundTrip(describe, 8).(*kmsg.DescribeConfigsResponse)
	if dc.Resources[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || dc.Resources[1].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("DescribeConfigs codes %d, %d, want TOPIC_ and CLUSTER_AUTHORIZATION_FAILED", dc.Resources[0].ErrorCode, dc.Resources[1].ErrorCode)
	}
}

// TestReplicaFetchNeedsClusterAction: a Fetch naming a replica ID is
// refused without ClusterAction, whatever the principal may Read.
func TestReplicaFetchNeedsClusterAction(t *testing.T) {
	tb := startBroker(t, withAuthorizer(""))
	grant(t, tb, clusterACL(acl.Create), topicACL("r", acl.All))
	adm, _ := newAdmin(t, tb.addr)
	if _, err := adm.CreateTopics(testContext(t), 1, 1, nil, "r"); err != nil {
		t.Fatal(err)
	}
	c := dial(t, tb.addr)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.ReplicaID, fetch.MaxBytes = 11, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "r"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fr := c.roundTrip(fetch, 1).(*kmsg.FetchResponse)
	if code := fr.Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("replica fetch without ClusterAction: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
	grant(t, tb, clusterACL(acl.ClusterAction))
	fr = c.roundTrip(fetch, 2).(*kmsg.FetchResponse)
	if code := fr.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Errorf("replica fetch with ClusterAction: error %d, want none", code)
	}
}

// TestInitProducerIDAuthorization: an idempotent producer needs
// IdempotentWrite on the cluster or Write on some topic.
func TestInitProducerIDAuthorization(t *testing.T) {
	tb := startBroker(t, withAuthorizer(""))
	c := dial(t, tb.addr)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version, init.ProducerID, init.ProducerEpoch = 2, -1, -1
	if r := c.roundTrip(init, 1).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("InitProducerId without IdempotentWrite or any Write: error %d, want CLUSTER_AUTHORIZATION_FAILED", r.ErrorCode)
	}
	grant(t, tb, topicACL("w", acl.Write))
	if r := c.roundTrip(init, 2).(*kmsg.InitProducerIDResponse); r.ErrorCode != 0 {
		t.Errorf("InitProducerId with Write on a topic: error %d, want none (KIP-679)", r.ErrorCode)
	}
}
