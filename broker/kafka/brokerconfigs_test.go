package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBrokerConfigDefaults changes broker-wide topic defaults at runtime
// through kadm, cluster-wide and for broker 0, and reads each value's
// source back from the topic and the broker resources as Kafka reports
// them; read-only and bad settings get INVALID_REQUEST.
func TestBrokerConfigDefaults(t *testing.T) {
	tb := startBroker(t)
	adm, cl := newAdmin(t, tb.addr)
	ctx := testContext(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "d"); err != nil {
		t.Fatal(err)
	}
	topicConfig := func(name string) kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "d")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("d", nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe: %v %v", err, rc.Err)
		}
		return configOf(t, rc, name)
	}
	brokerConfigs := func(ids ...int32) kadm.ResourceConfig {
		t.Helper()
		rcs, err := adm.DescribeBrokerConfigs(ctx, ids...)
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("describe brokers %v: %v %+v", ids, err, rcs)
		}
		return rcs[0]
	}
	alter := func(state bool, configs []kadm.AlterConfig, ids ...int32) error {
		t.Helper()
		var resp kadm.AlterConfigsResponses
		var err error
		if state {
			resp, err = adm.AlterBrokerConfigsState(ctx, configs, ids...)
		} else {
			resp, err = adm.AlterBrokerConfigs(ctx, configs, ids...)
		}
		if err != nil || len(resp) != 1 {
			t.Fatalf("alter brokers %v: %v %+v", ids, err, resp)
		}
		return resp[0].Err
	}
	retention := func() time.Duration {
		l, _ := tb.logs.Get("d", 0)
		return l.Config().Retention
	}

	if c := topicConfig("retention.ms"); c.Source != kmsg.ConfigSourceDefaultConfig || len(c.Synonyms) != 1 || c.Synonyms[0].Key != "log.retention.ms" {
		t.Fatalf("retention.ms before: %+v", c)
	}

	// Cluster-wide (the "" resource).
	if err := alter(false, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr("60000")},
		{Op: kadm.SetConfig, Name: "unclean.leader.election.enable", Value: kadm.StringPtr("true")},
		{Op: kadm.AppendConfig, Name: "log.cleanup.policy", Value: kadm.StringPtr("delete")},
	}); err != nil {
		t.Fatal(err)
	}
	c := topicConfig("retention.ms")
	if c.MaybeValue() != "60000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || len(c.Synonyms) != 2 ||
		c.Synonyms[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || c.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms after the cluster-wide change: %+v", c)
	}
	if c := topicConfig("unclean.leader.election.enable"); c.MaybeValue() != "true" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("unclean.leader.election.enable: %+v", c)
	}
	if got := retention(); got != time.Minute {
		t.Fatalf("the open log's retention is %v, want 1m", got)
	}
	created, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.ms": kadm.StringPtr("1000")}, "later")
	if err != nil || created.Err != nil {
		t.Fatalf("create: %v %+v", err, created)
	}
	if c := created.Configs["retention.ms"]; c.MaybeValue() != "60000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("CreateTopics answers retention.ms %+v", c)
	}
	if c := created.Configs["segment.ms"]; c.MaybeValue() != "1000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("CreateTopics answers segment.ms %+v", c)
	}
	wide := brokerConfigs()
	if len(wide.Configs) != 3 || configOf(t, wide, "log.retention.ms").Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("the default resource: %+v", wide.Configs)
	}

	// Broker 0's own value wins.
	if err := alter(false, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr("120000")}}, 0); err != nil {
		t.Fatal(err)
	}
	if c := topicConfig("retention.ms"); c.MaybeValue() != "120000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig || len(c.Synonyms) != 3 {
		t.Fatalf("retention.ms after broker 0's change: %+v", c)
	}
	own := brokerConfigs(0)
	if c := configOf(t, own, "log.retention.ms"); c.MaybeValue() != "120000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("broker 0's log.retention.ms: %+v", c)
	}
	if c := configOf(t, own, "min.insync.replicas"); c.MaybeValue() != "1" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("broker 0's min.insync.replicas: %+v", c)
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dres := kmsg.NewDescribeConfigsRequestResource()
	dres.ResourceType, dres.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
	dres.ConfigNames = []string{"log.retention.ms", "num.partitions"}
	dreq.Resources = append(dreq.Resources, dres)
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil || len(dresp.Resources) != 1 || len(dresp.Resources[0].Configs) != 2 {
		t.Fatalf("describe broker 0: %v %+v", err, dresp)
	}
	for _, c := range dresp.Resources[0].Configs {
		if c.ReadOnly != (c.Name == "num.partitions") {
			t.Errorf("%s: read-only %v", c.Name, c.ReadOnly)
		}
	}
	if got := retention(); got != 2*time.Minute {
		t.Fatalf("the open log's retention is %v, want 2m", got)
	}

	// Read-only settings, bad values and other brokers are refused as Kafka
	// refuses them, and change nothing.
	for _, a := range []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "num.partitions", Value: kadm.StringPtr("3")},
		{Op: kadm.SetConfig, Name: "log.retention.hours", Value: kadm.StringPtr("1")},
		{Op: kadm.SetConfig, Name: "broker.id", Value: kadm.StringPtr("3")},
		{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("0")},
		{Op: kadm.AppendConfig, Name: "log.retention.ms", Value: kadm.StringPtr("1")},
	} {
		if err := alter(false, []kadm.AlterConfig{a}); !errors.Is(err, kerr.InvalidRequest) && !(a.Op == kadm.AppendConfig && errors.Is(err, kerr.InvalidConfig)) {
			t.Errorf("alter %s=%s: %v", a.Name, *a.Value, err)
		}
	}
	// Another broker's resource: kadm would route it to that broker, so
	// the request goes to broker 0 by hand.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "5"
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = "log.retention.ms", kmsg.StringPtr("1")
	rr.Configs = append(rr.Configs, rc)
	req.Resources = append(req.Resources, rr)
	if raw, err := cl.Broker(0).Request(ctx, req); err != nil || raw.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("altering broker 5 on broker 0: %v %+v", err, raw)
	}
	if c := topicConfig("min.insync.replicas"); c.MaybeValue() != "1" {
		t.Fatalf("a refused change applied: %+v", c)
	}

	// AlterConfigs replaces a resource's whole dynamic state; DELETE removes
	// one value.
	if err := alter(true, nil); err != nil {
		t.Fatal(err)
	}
	if c := topicConfig("unclean.leader.election.enable"); c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("the cluster-wide state survived its replacement: %+v", c)
	}
	if err := alter(false, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.retention.ms"}}, 0); err != nil {
		t.Fatal(err)
	}
	if c := topicConfig("retention.ms"); c.MaybeValue() != "604800000" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms after deletes: %+v", c)
	}
	if got := retention(); got != 7*24*time.Hour {
		t.Fatalf("the open log's retention is %v, want the default", got)
	}
}
