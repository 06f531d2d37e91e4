package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/waitfor"
)

// topicConfigOn asks one broker itself for a topic config's value and
// source.
func topicConfigOn(cl *kgo.Client, id int32, topic, name string) (string, kmsg.ConfigSource, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{name}
	req.Resources = append(req.Resources, rr)
	req.IncludeSynonyms = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := cl.Broker(int(id)).Request(ctx, req)
	if err != nil {
		return "", 0, err
	}
	resp := raw.(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 || len(resp.Resources[0].Configs) != 1 {
		return "", 0, fmt.Errorf("describe on broker %d: %+v", id, resp.Resources)
	}
	c := resp.Resources[0].Configs[0]
	if c.Value == nil {
		return "", c.Source, nil
	}
	return *c.Value, c.Source, nil
}

// TestClusterBrokerDefaultMinISR changes min.insync.replicas cluster-wide at
// runtime with kadm on a 3-broker ZooKeeper cluster: every broker reports
// the topic's value as DYNAMIC_DEFAULT_BROKER_CONFIG without a restart, an
// acks=all write then fails with NOT_ENOUGH_REPLICAS while one replica is
// down, and removing the default lets writes through again.
func TestClusterBrokerDefaultMinISR(t *testing.T) {
	t.Parallel()
	const topic = "broker-default-min-isr"
	c := startLocalCluster(t, 3, 1)
	adm := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	waitfor.Until(c.t, 20*time.Second, "the topic to be fully replicated", func() bool { return c.fullyReplicated(adm, topic) })
	cl := c.client()
	for _, id := range c.initial {
		// A broker learns of the topic from ZooKeeper on its own time;
		// until then it answers UNKNOWN_TOPIC_OR_PARTITION.
		waitfor.Until(c.t, 20*time.Second, fmt.Sprintf("broker %d to describe the topic", id), func() bool {
			_, _, err := topicConfigOn(cl, id, topic, "min.insync.replicas")
			return err == nil
		})
		if v, src, err := topicConfigOn(cl, id, topic, "min.insync.replicas"); err != nil || v != "1" || src != kmsg.ConfigSourceDefaultConfig {
			t.Fatalf("broker %d before: %s %v %v", id, v, src, err)
		}
	}

	// How long a cluster-wide change takes to reach every broker, from the
	// request: the median of a few changes, logged for the docs.
	var spread []time.Duration
	for i := range 5 {
		value := strconv.Itoa(3600000 + i)
		start := time.Now()
		if resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: &value}}); err != nil || resp[0].Err != nil {
			t.Fatalf("cluster-wide log.retention.ms=%s: %v %+v", value, err, resp)
		}
		waitfor.Until(c.t, 20*time.Second, "every broker to apply log.retention.ms="+value, func() bool {
			for _, id := range c.initial {
				if v, _, err := topicConfigOn(cl, id, topic, "retention.ms"); err != nil || v != value {
					return false
				}
			}
			return true
		})
		spread = append(spread, time.Since(start))
	}
	slices.Sort(spread)
	t.Logf("a cluster-wide change reached all 3 brokers in %v (median of %d; polled every 50 ms)", spread[len(spread)/2], len(spread))

	resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("3")}})
	if err != nil || len(resp) != 1 || resp[0].Err != nil {
		t.Fatalf("cluster-wide min.insync.replicas=3: %v %+v", err, resp)
	}
	// A read-only setting is refused as Kafka refuses it.
	if resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "num.partitions", Value: kadm.StringPtr("4")}}); err != nil || len(resp) != 1 || !errors.Is(resp[0].Err, kerr.InvalidRequest) {
		t.Fatalf("num.partitions at runtime: %v %+v", err, resp)
	}
	waitfor.Until(c.t, 20*time.Second, "every broker to apply the cluster-wide default", func() bool {
		for _, id := range c.initial {
			if v, src, err := topicConfigOn(cl, id, topic, "min.insync.replicas"); err != nil || v != "3" || src != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
				return false
			}
		}
		return true
	})

	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	for i, err := range produceSyncValues(producer, topic, 0, 10) {
		if err != nil {
			t.Fatalf("write %d with all replicas up: %v", i, err)
		}
	}
	parts, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := parts[0].Leader
	follower := c.others(leader)[0]
	c.signal(follower, syscall.SIGKILL)
	waitfor.Until(c.t, 30*time.Second, "the ISR to lose the killed follower", func() bool {
		parts, err := c.partitions(adm, topic)
		return err == nil && len(parts[0].ISR) == 2 && !slices.Contains(parts[0].ISR, follower)
	})
	strict := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Second)
	err = strict.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("refused")}).FirstErr()
	pcancel()
	if !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("acks=all with 2 in-sync replicas under a cluster-wide min.insync.replicas=3: got %v, want NOT_ENOUGH_REPLICAS", err)
	}

	// Back to the built-in default, at runtime: the same write goes through.
	if resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "min.insync.replicas"}}); err != nil || len(resp) != 1 || resp[0].Err != nil {
		t.Fatalf("removing the cluster-wide default: %v %+v", err, resp)
	}
	waitfor.Until(c.t, 20*time.Second, "the leader to drop the cluster-wide default", func() bool {
		v, src, err := topicConfigOn(cl, leader, topic, "min.insync.replicas")
		return err == nil && v == "1" && src == kmsg.ConfigSourceDefaultConfig
	})
	for i, err := range produceSyncValues(producer, topic, 10, 10) {
		if err != nil {
			t.Fatalf("write %d after the default was removed: %v", i, err)
		}
	}
}

// TestClusterBrokerDefaultUncleanElection turns unclean.leader.election.enable
// on cluster-wide at runtime while a partition is offline with only an
// out-of-sync replica alive: the controller elects it, as Kafka's does when
// the setting changes, with no election request and no topic override.
func TestClusterBrokerDefaultUncleanElection(t *testing.T) {
	t.Parallel()
	c := startLocalClusterWith(t, 3, 1, "auto.leader.rebalance.enable=false")
	c.createAssignedTopic("lonely", [][]int32{{2, 3}})
	adm := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leaderOf := func() int32 {
		parts, err := c.partitions(adm, "lonely")
		if err != nil || len(parts) != 1 {
			return -2
		}
		return parts[0].Leader
	}

	// 3 dies (2 alone in sync), then 2 (offline), then 3 returns out of sync.
	c.signal(3, syscall.SIGKILL)
	waitfor.Until(c.t, 30*time.Second, "lonely/0's ISR to shrink to broker 2", func() bool {
		parts, err := c.partitions(adm, "lonely")
		return err == nil && slices.Equal(parts[0].ISR, []int32{2})
	})
	c.signal(2, syscall.SIGKILL)
	c.restart(3)
	waitfor.Until(c.t, 30*time.Second, "lonely/0 offline with broker 3 back", func() bool {
		md, err := adm.Metadata(ctx)
		return err == nil && len(md.Brokers) == 2 && leaderOf() == -1
	})

	resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "unclean.leader.election.enable", Value: kadm.StringPtr("true")}})
	if err != nil || len(resp) != 1 || resp[0].Err != nil {
		t.Fatalf("cluster-wide unclean.leader.election.enable=true: %v %+v", err, resp)
	}
	waitfor.Until(c.t, 30*time.Second, "broker 3 to lead lonely/0 by an unclean election", func() bool { return leaderOf() == 3 })
	rcs, err := adm.DescribeTopicConfigs(ctx, "lonely")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("lonely", nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rc.Configs, func(cfg kadm.Config) bool { return cfg.Key == "unclean.leader.election.enable" })
	if i < 0 || rc.Configs[i].MaybeValue() != "true" || rc.Configs[i].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("lonely's configs: %+v", rc.Configs)
	}
}
