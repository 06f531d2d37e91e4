package kafka

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/cluster"
)

func newAdmin(t *testing.T, addr string) (*kadm.Client, *kgo.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl), cl
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func configOf(t *testing.T, rc kadm.ResourceConfig, key string) kadm.Config {
	t.Helper()
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("resource %s has no config %s", rc.Name, key)
	return kadm.Config{}
}

func TestAdminTopicLifecycle(t *testing.T) {
	tb := startBroker(t)
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)

	// Create, with an override.
	created, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "orders")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.NumPartitions != 3 || created.ReplicationFactor != 1 || created.ID == (kadm.TopicID{}) {
		t.Fatalf("create response: %+v", created)
	}
	if c := created.Configs["retention.ms"]; c.MaybeValue() != "60000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("create response retention.ms: %+v", c)
	}
	for p := int32(0); p < 3; p++ {
		if _, ok := tb.logs.Get("orders", p); !ok {
			t.Fatalf("no log for orders-%d", p)
		}
	}

	// Default partitions and replication factor (-1).
	if _, err := adm.CreateTopic(ctx, -1, -1, nil, "defaults"); err != nil {
		t.Fatalf("create with defaults: %v", err)
	}

	// Errors are per topic, with Kafka's codes.
	bad := []struct {
		name       string
		partitions int32
		rf         int16
		configs    map[string]*string
		want       error
	}{
		{"orders", 1, 1, nil, kerr.TopicAlreadyExists},
		{"rf-too-big", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"zero-partitions", 0, 1, nil, kerr.InvalidPartitions},
		{"bad config", 1, 1, nil, kerr.InvalidTopicException},
		{"unknown-config", 1, 1, map[string]*string{"no.such.config": kadm.StringPtr("1")}, kerr.InvalidConfig},
		{"bad-value", 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("soon")}, kerr.InvalidConfig},
		{"unknown-policy", 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact,archive")}, kerr.InvalidConfig},
		{"null-value", 1, 1, map[string]*string{"retention.ms": nil}, kerr.InvalidConfig},
	}
	for _, tc := range bad {
		_, err := adm.CreateTopic(ctx, tc.partitions, tc.rf, tc.configs, tc.name)
		if !errors.Is(err, tc.want) {
			t.Errorf("create %q: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, ok := tb.cluster.Topic("rf-too-big"); ok {
		t.Fatal("a failed creation left a topic behind")
	}

	// validate_only creates nothing.
	vr, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, "validated")
	if err != nil || vr["validated"].Err != nil {
		t.Fatalf("validate: %v %v", err, vr["validated"].Err)
	}
	if _, ok := tb.cluster.Topic("validated"); ok {
		t.Fatal("validate_only created the topic")
	}

	// List and describe.
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 2 || len(topics["orders"].Partitions) != 3 || topics["orders"].ID != created.ID {
		t.Fatalf("list: %+v", topics)
	}
	for _, p := range topics["orders"].Partitions {
		if p.Leader != 0 || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.Err != nil {
			t.Fatalf("partition %+v", p)
		}
	}

	// Grow the topic; shrinking is refused.
	if resp, err := adm.UpdatePartitions(ctx, 5, "orders"); err != nil || resp["orders"].Err != nil {
		t.Fatalf("grow: %v %v", err, resp["orders"].Err)
	}
	if resp, _ := adm.UpdatePartitions(ctx, 2, "orders"); !errors.Is(resp["orders"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrink: %v", resp["orders"].Err)
	}
	if resp, _ := adm.CreatePartitions(ctx, 1, "missing"); !errors.Is(resp["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("grow a missing topic: %v", resp["missing"].Err)
	}
	topics, err = adm.ListTopics(ctx, "orders")
	if err != nil || len(topics["orders"].Partitions) != 5 {
		t.Fatalf("after growing: %v %+v", err, topics["orders"])
	}
	if _, ok := tb.logs.Get("orders", 4); !ok {
		t.Fatal("no log for the new partition orders-4")
	}

	// Delete: metadata and data go.
	l, _ := tb.logs.Get("orders", 0)
	dir := l.Dir()
	resp, err := adm.DeleteTopics(ctx, "orders", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if resp["orders"].Err != nil || !errors.Is(resp["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete: %+v", resp)
	}
	if _, ok := tb.cluster.Topic("orders"); ok {
		t.Fatal("topic still listed after deletion")
	}
	if _, ok := tb.logs.Get("orders", 0); ok {
		t.Fatal("log still open after deletion")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		// broker/log may keep the directory renamed for file.delete.delay.ms;
		// it must at least be gone from its live name.
		t.Fatalf("partition directory %s still present: %v", filepath.Base(dir), err)
	}
	// A fresh client: kgo serves repeated metadata requests from a cache.
	fresh, _ := newAdmin(t, tb.addr)
	topics, _ = fresh.ListTopics(ctx)
	if _, ok := topics["orders"]; ok {
		t.Fatalf("deleted topic listed: %+v", topics["orders"])
	}
}

func TestAdminConfigs(t *testing.T) {
	tb := startBroker(t, withConfig(func(c *Config) { c.NumPartitions = 2 }))
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "cfg"); err != nil {
		t.Fatal(err)
	}

	describe := func() kadm.ResourceConfig {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("cfg", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe: %v %v", err, rc.Err)
		}
		return rc
	}
	rc := describe()
	if c := configOf(t, rc, "retention.ms"); c.MaybeValue() != "60000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig || len(c.Synonyms) != 2 {
		t.Fatalf("retention.ms: %+v", c)
	}
	if c := configOf(t, rc, "segment.bytes"); c.MaybeValue() != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes: %+v", c)
	}

	// Incremental: set one, delete another, append to a list.
	alter := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("3600000")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("delete")},
	}
	if resp, err := adm.AlterTopicConfigs(ctx, alter, "cfg"); err != nil || resp[0].Err != nil {
		t.Fatalf("incremental alter: %v %+v", err, resp)
	}
	rc = describe()
	if c := configOf(t, rc, "segment.ms"); c.MaybeValue() != "3600000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("segment.ms after alter: %+v", c)
	}
	if c := configOf(t, rc, "retention.ms"); c.MaybeValue() != "604800000" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms after delete: %+v", c)
	}
	l, _ := tb.logs.Get("cfg", 0)
	if got := l.Config().SegmentAge; got != time.Hour {
		t.Fatalf("the open log's segment.ms is %v after the alter, want 1h", got)
	}

	// Invalid values and non-list appends are refused and change nothing.
	for _, a := range []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("-5")},
		{Op: kadm.SetConfig, Name: "no.such.config", Value: kadm.StringPtr("1")},
		{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")},
	} {
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{a}, "cfg")
		if err != nil || !errors.Is(resp[0].Err, kerr.InvalidConfig) {
			t.Errorf("alter %s=%s: %v %+v", a.Name, *a.Value, err, resp)
		}
	}
	if resp, _ := adm.AlterTopicConfigs(ctx, alter[:1], "missing"); !errors.Is(resp[0].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("alter a missing topic: %+v", resp)
	}

	// Non-incremental AlterConfigs replaces every override.
	state := []kadm.AlterConfig{{Name: "max.message.bytes", Value: kadm.StringPtr("2000000")}}
	if resp, err := adm.AlterTopicConfigsState(ctx, state, "cfg"); err != nil || resp[0].Err != nil {
		t.Fatalf("alter state: %v %+v", err, resp)
	}
	rc = describe()
	if c := configOf(t, rc, "segment.ms"); c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.ms survived a full replacement: %+v", c)
	}
	if c := configOf(t, rc, "max.message.bytes"); c.MaybeValue() != "2000000" {
		t.Fatalf("max.message.bytes: %+v", c)
	}
	if resp, _ := adm.ValidateAlterTopicConfigs(ctx, alter[:1], "cfg"); resp[0].Err != nil {
		t.Fatalf("validate alter: %+v", resp)
	}
	if c := configOf(t, describe(), "segment.ms"); c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatal("validate_only changed the config")
	}

	// Broker configs are described and read-only.
	brcs, err := adm.DescribeBrokerConfigs(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	brc, err := brcs.On("0", nil)
	if err != nil || brc.Err != nil {
		t.Fatalf("describe broker: %v %v", err, brc.Err)
	}
	if c := configOf(t, brc, "num.partitions"); c.MaybeValue() != "2" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("num.partitions: %+v", c)
	}
	if c := configOf(t, brc, "socket.request.max.bytes"); c.MaybeValue() != "104857600" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("socket.request.max.bytes: %+v", c)
	}
	if resp, _ := adm.AlterBrokerConfigs(ctx, alter[:1], 0); len(resp) != 1 || !errors.Is(resp[0].Err, kerr.InvalidRequest) {
		t.Fatalf("altering a broker config: %+v", resp)
	}
}

func autoCreateMetadata(t *testing.T, cl *kgo.Client, topic string) kmsg.MetadataResponseTopic {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = true
	resp, err := req.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 {
		t.Fatalf("%d topics in the response", len(resp.Topics))
	}
	return resp.Topics[0]
}

func TestMetadataAutoCreate(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		tb := startBroker(t, withConfig(func(c *Config) { c.NumPartitions = 4 }))
		_, cl := newAdmin(t, tb.addr)
		// The creating request gets LEADER_NOT_AVAILABLE and no partitions,
		// as from Kafka; the next one sees the topic whole.
		if mt := autoCreateMetadata(t, cl, "auto"); mt.ErrorCode != kerr.LeaderNotAvailable.Code || len(mt.Partitions) != 0 {
			t.Fatalf("creating request: error %d, %d partitions; want LEADER_NOT_AVAILABLE and none", mt.ErrorCode, len(mt.Partitions))
		}
		mt := autoCreateMetadata(t, cl, "auto")
		if mt.ErrorCode != 0 || len(mt.Partitions) != 4 || mt.TopicID == ([16]byte{}) {
			t.Fatalf("auto-created topic: error %d, %d partitions", mt.ErrorCode, len(mt.Partitions))
		}
		if _, ok := tb.cluster.Topic("auto"); !ok {
			t.Fatal("topic not in the cluster model")
		}
		if mt := autoCreateMetadata(t, cl, "bad name!"); mt.ErrorCode != kerr.InvalidTopicException.Code {
			t.Fatalf("invalid name: error %d", mt.ErrorCode)
		}

		// The request can opt out even when the broker allows it.
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("not-wanted")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testContext(t), cl)
		if err != nil || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("allow_auto_topic_creation=false: %v %+v", err, resp)
		}

		// By topic ID (v10+), known and unknown.
		req = kmsg.NewPtrMetadataRequest()
		for _, id := range [][16]byte{mt.TopicID, {1, 2, 3}} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.TopicID = id
			req.Topics = append(req.Topics, rt)
		}
		resp, err = req.RequestWith(testContext(t), cl)
		if err != nil || len(resp.Topics) != 2 {
			t.Fatalf("by id: %v %+v", err, resp)
		}
		if resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "auto" || resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
			t.Fatalf("by id: %+v", resp.Topics)
		}
	})
	t.Run("off", func(t *testing.T) {
		tb := startBroker(t, withConfig(func(c *Config) { c.AutoCreateTopics = false }))
		_, cl := newAdmin(t, tb.addr)
		if mt := autoCreateMetadata(t, cl, "auto"); mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("error %d, want UNKNOWN_TOPIC_OR_PARTITION", mt.ErrorCode)
		}
		if _, ok := tb.cluster.Topic("auto"); ok {
			t.Fatal("topic created with auto-creation off")
		}
	})
}

func TestClusterAndCoordinator(t *testing.T) {
	tb := startBroker(t, withConfig(func(c *Config) { c.BrokerID = 7; c.Rack = "r1" }))
	adm, cl := newAdmin(t, tb.addr)
	ctx := testContext(t)
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.Controller != 7 || md.Cluster == "" || len(md.Brokers) != 1 || md.Brokers[0].NodeID != 7 || md.Brokers[0].Rack == nil || *md.Brokers[0].Rack != "r1" {
		t.Fatalf("metadata: %+v", md)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dresp, err := dc.RequestWith(ctx, cl)
	if err != nil || dresp.ClusterID != md.Cluster || dresp.ControllerID != 7 || len(dresp.Brokers) != 1 {
		t.Fatalf("describe cluster: %v %+v", err, dresp)
	}
	port := int32(tb.broker.Addr().(*net.TCPAddr).Port)
	coords := adm.FindGroupCoordinators(ctx, "g1", "g2")
	for _, g := range []string{"g1", "g2"} {
		if c := coords[g]; c.Err != nil || c.NodeID != 7 || c.Port != port {
			t.Fatalf("coordinator of %s: %+v", g, c)
		}
	}
	// FindCoordinator v0 (kafka-go and librdkafka's group consumers use it).
	rc := dial(t, tb.addr)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(0)
	fc.CoordinatorKey = "g1"
	if resp := rc.roundTrip(fc, 1).(*kmsg.FindCoordinatorResponse); resp.ErrorCode != 0 || resp.NodeID != 7 || resp.Port != port {
		t.Fatalf("FindCoordinator v0: %+v", resp)
	}
	fc.SetVersion(3)
	fc.CoordinatorType = 1
	fc.CoordinatorKey = "tx1"
	if resp := rc.roundTrip(fc, 2).(*kmsg.FindCoordinatorResponse); resp.ErrorCode != 0 || resp.NodeID != 7 || resp.Port != port {
		t.Fatalf("transaction coordinator: %+v", resp)
	}
	fc.CoordinatorKey = ""
	if resp := rc.roundTrip(fc, 3).(*kmsg.FindCoordinatorResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("transaction coordinator of an empty ID: %+v", resp)
	}
}

// TestRestartKeepsTopics reopens the whole stack on the same directory: the
// topics come back with their IDs, partitions and overrides.
func TestRestartKeepsTopics(t *testing.T) {
	dir := t.TempDir()
	tb := startBroker(t, withDir(dir))
	adm, cl := newAdmin(t, tb.addr)
	ctx := testContext(t)
	created, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("5000")}, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "dropped"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteTopics(ctx, "dropped"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	tb.stop()

	tb = startBroker(t, withDir(dir))
	topic, ok := tb.cluster.Topic("kept")
	if !ok || topic.ID != [16]byte(created.ID) || len(topic.Partitions) != 2 || topic.Config["retention.ms"] != "5000" {
		t.Fatalf("after restart: %+v", topic)
	}
	if _, ok := tb.cluster.Topic("dropped"); ok {
		t.Fatal("a deleted topic came back")
	}
	l, ok := tb.logs.Get("kept", 1)
	if !ok || l.Config().Retention != 5*time.Second {
		t.Fatalf("log of kept-1 after restart: %v", ok)
	}
}

// TestListedTwice: a topic or config resource a request lists twice gets
// INVALID_REQUEST, once, and the request's other entries still go through.
func TestListedTwice(t *testing.T) {
	tb := startBroker(t)
	_, cl := newAdmin(t, tb.addr)
	ctx := testContext(t)

	ct := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range []string{"dup", "dup", "single"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		ct.Topics = append(ct.Topics, rt)
	}
	ctResp, err := ct.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int16{}
	for _, st := range ctResp.Topics {
		got[st.Topic] = st.ErrorCode
	}
	if len(ctResp.Topics) != 2 || got["dup"] != kerr.InvalidRequest.Code || got["single"] != 0 {
		t.Fatalf("create topics: %+v", ctResp.Topics)
	}

	for _, incremental := range []bool{false, true} {
		var codes []int16
		if incremental {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			for range 2 {
				rr := kmsg.NewIncrementalAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "single"
				req.Resources = append(req.Resources, rr)
			}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range resp.Resources {
				codes = append(codes, r.ErrorCode)
			}
		} else {
			req := kmsg.NewPtrAlterConfigsRequest()
			for range 2 {
				rr := kmsg.NewAlterConfigsRequestResource()
				rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "single"
				req.Resources = append(req.Resources, rr)
			}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range resp.Resources {
				codes = append(codes, r.ErrorCode)
			}
		}
		if len(codes) != 2 || codes[0] != kerr.InvalidRequest.Code || codes[1] != kerr.InvalidRequest.Code {
			t.Fatalf("alter configs (incremental %v): %v", incremental, codes)
		}
	}
}

func TestDescribeLogDirs(t *testing.T) {
	tb := startBroker(t)
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, topic := range []string{"sized", "other", "gone"} {
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 50; i++ {
		r := &kgo.Record{Topic: "sized", Partition: int32(i % 2), Value: make([]byte, 1000)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := adm.DeleteTopics(ctx, "gone"); err != nil {
		t.Fatal(err)
	}

	dirs, err := adm.DescribeBrokerLogDirs(ctx, tb.broker.cfg.BrokerID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 1 {
		t.Fatalf("%d log dirs, want the data directory alone: %v", len(dirs), dirs)
	}
	for path, d := range dirs {
		if d.Err != nil || !filepath.IsAbs(path) || path != d.Dir {
			t.Fatalf("dir %q: %+v", path, d)
		}
		if d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
			t.Errorf("volume: total %d usable %d", d.TotalBytes, d.UsableBytes)
		}
		if _, ok := d.Topics["gone"]; ok {
			t.Error("a deleted topic is listed")
		}
		for p := int32(0); p < 2; p++ {
			l, _ := tb.logs.Get("sized", p)
			got, ok := d.Topics.Lookup("sized", p)
			if !ok || got.Size != l.Size() || got.Size < 25*1000 || got.OffsetLag != 0 || got.IsFuture {
				t.Errorf("sized/%d: %+v (found %v), log size %d", p, got, ok, l.Size())
			}
			if got, ok := d.Topics.Lookup("other", p); !ok || got.Size != 0 {
				t.Errorf("other/%d: %+v (found %v)", p, got, ok)
			}
		}
	}

	// Asked for some partitions: those held, and nothing else.
	ask := kadm.TopicsSet{}
	ask.Add("sized", 1)
	ask.Add("nosuch", 0)
	dirs, err = adm.DescribeBrokerLogDirs(ctx, tb.broker.cfg.BrokerID, ask)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if len(d.Topics) != 1 || len(d.Topics["sized"]) != 1 {
			t.Errorf("asked for sized/1 and nosuch/0, got %v", d.Topics)
		}
		if _, ok := d.Topics.Lookup("sized", 1); !ok {
			t.Errorf("sized/1 missing: %v", d.Topics)
		}
	}
}

func TestPartitionReassignmentRequests(t *testing.T) {
	tb := startBroker(t)
	adm, cl := newAdmin(t, tb.addr)
	ctx := testContext(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "ra"); err != nil {
		t.Fatal(err)
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("ra", 0, []int32{9})
	req.CancelAssign("ra", 1)
	req.Assign("nosuch", 0, []int32{0})
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		topic     string
		partition int32
		err       error
	}{{"ra", 0, kerr.InvalidReplicaAssignment}, {"ra", 1, kerr.NoReassignmentInProgress}, {"nosuch", 0, kerr.UnknownTopicOrPartition}} {
		if got := resp[want.topic][want.partition]; !errors.Is(got.Err, want.err) {
			t.Errorf("%s/%d: %v, want %v", want.topic, want.partition, got.Err, want.err)
		}
	}
	// kadm sends allow_replication_factor_change false under ForbidAlterRf.
	req = nil
	req.Assign("ra", 0, []int32{0, 1})
	if resp, err := adm.AlterPartitionAssignments(kadm.ForbidAlterRf(ctx), req); err != nil || !errors.Is(resp["ra"][0].Err, kerr.InvalidReplicationFactor) {
		t.Errorf("a replication factor change under ForbidAlterRf: %v %+v", err, resp)
	}
	// A partition listed twice.
	raw := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = "ra"
	for range 2 {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = 0, []int32{0}
		rt.Partitions = append(rt.Partitions, rp)
	}
	raw.Topics = append(raw.Topics, rt)
	rawResp, err := raw.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rawResp.Topics[0].Partitions {
		if p.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("a partition listed twice: error %d, want INVALID_REQUEST", p.ErrorCode)
		}
	}
	if pending, err := cluster.PendingReassignments(tb.store); err != nil || pending != nil {
		t.Fatalf("rejected moves left a request: %+v %v", pending, err)
	}

	// A single broker has nothing to move: a move onto the replicas the
	// partition has is accepted, and there is nothing to list.
	req = nil
	req.Assign("ra", 1, []int32{0})
	if resp, err := adm.AlterPartitionAssignments(ctx, req); err != nil || resp.Error() != nil {
		t.Fatalf("a move onto the same broker: %v %v", err, resp.Error())
	}
	if pending, err := cluster.PendingReassignments(tb.store); err != nil || pending != nil {
		t.Fatalf("a single broker recorded a move no controller will carry out: %+v %v", pending, err)
	}
	all := kadm.TopicsSet{}
	all.Add("ra", 0, 1)
	if listed, err := adm.ListPartitionReassignments(ctx, all); err != nil || len(listed) != 0 {
		t.Errorf("list after the move: %v %v", listed, err)
	}
}

func TestElectLeadersOnOneBroker(t *testing.T) {
	tb := startBroker(t)
	adm, cl := newAdmin(t, tb.addr)
	ctx := testContext(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "el"); err != nil {
		t.Fatal(err)
	}
	s := kadm.TopicsSet{}
	s.Add("el", 0)
	s.Add("nosuch", 0)
	for _, how := range []kadm.ElectLeadersHow{kadm.ElectPreferredReplica, kadm.ElectLiveReplica} {
		res, err := adm.ElectLeaders(ctx, how, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := res["el"][0].Err; !errors.Is(err, kerr.ElectionNotNeeded) {
			t.Errorf("%v el/0: %v, want ELECTION_NOT_NEEDED (the one broker leads)", how, err)
		}
		if err := res["nosuch"][0].Err; !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Errorf("%v nosuch/0: %v", how, err)
		}
	}
	// Null topics: every partition.
	all, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all["el"]) != 2 {
		t.Errorf("electing every partition answered %v", all)
	}
	raw := kmsg.NewPtrElectLeadersRequest()
	raw.ElectionType = 5
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "el", []int32{1}
	raw.Topics = append(raw.Topics, rt)
	resp, err := raw.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRequest.Code {
		t.Errorf("election type 5: error %d, want INVALID_REQUEST", code)
	}
}

func TestACLRequestsSaySecurityDisabled(t *testing.T) {
	tb := startBroker(t)
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	b := kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny)
	desc, err := adm.DescribeACLs(ctx, b)
	if err != nil || len(desc) == 0 {
		t.Fatalf("DescribeACLs: %v %+v", err, desc)
	}
	for _, d := range desc {
		if !errors.Is(d.Err, kerr.SecurityDisabled) || len(d.Described) != 0 {
			t.Errorf("DescribeACLs: %+v, want SECURITY_DISABLED", d)
		}
	}
	b = kadm.NewACLs().Topics("t").Allow("User:alice").AllowHosts().Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := adm.CreateACLs(ctx, b)
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.SecurityDisabled) {
		t.Errorf("CreateACLs: %v %+v, want one SECURITY_DISABLED result", err, res)
	}
	del, err := adm.DeleteACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny))
	if err != nil || len(del) != 1 || !errors.Is(del[0].Err, kerr.SecurityDisabled) {
		t.Errorf("DeleteACLs: %v %+v, want one SECURITY_DISABLED result", err, del)
	}
}

func TestDescribeProducers(t *testing.T) {
	tb := startBroker(t)
	adm, _ := newAdmin(t, tb.addr)
	ctx := testContext(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "idem"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	before := time.Now().UnixMilli()
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "idem", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := kadm.TopicsSet{}
	s.Add("idem", 0, 1)
	described, err := adm.DescribeProducers(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	p0 := described["idem"].Partitions[0]
	got, ok := p0.ActiveProducers[id]
	if p0.Err != nil || len(p0.ActiveProducers) != 1 || !ok {
		t.Fatalf("idem/0: %+v, want producer %d alone", p0, id)
	}
	if got.ProducerEpoch != epoch || got.LastSequence != 4 || got.LastTimestamp < before || got.CoordinatorEpoch != -1 || got.CurrentTxnStartOffset != -1 {
		t.Errorf("producer %d: %+v; want epoch %d, last sequence 4 (five one-record batches), its last timestamp, no transaction", id, got, epoch)
	}
	if p1 := described["idem"].Partitions[1]; p1.Err != nil || len(p1.ActiveProducers) != 0 {
		t.Errorf("idem/1, never written: %+v", p1)
	}
}
