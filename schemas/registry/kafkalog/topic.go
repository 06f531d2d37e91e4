package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// maxReplicationFactor is Confluent's kafkastore.topic.replication.factor
// default: the topic is every schema the cluster knows, so it gets three
// copies where there are three brokers.
const maxReplicationFactor = 3

// ensureTopic makes sure the topic exists, once per Log: created with one
// partition (the registry's order is the topic's order), cleanup.policy
// compact (the latest record of each key is the state), replication factor
// min(3, live brokers) and min.insync.replicas one less than that when
// there are three copies (an acknowledged write survives one broker's
// loss, and a single broker's loss does not stop writes). An existing
// topic is checked: one that is not compacted, or has more than one
// partition, is refused with what to change, as Confluent's registry does.
func (l *Log) ensureTopic(ctx context.Context) error {
	l.ensureMu.Lock()
	defer l.ensureMu.Unlock()
	if l.ensured {
		return nil
	}
	adm := kadm.NewClient(l.admin)
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("kafkalog: listing the brokers to create %s: %w", l.cfg.Topic, err)
	}
	rf := int16(min(maxReplicationFactor, max(len(brokers), 1)))
	minISR := "1"
	if rf >= maxReplicationFactor {
		minISR = strconv.Itoa(int(rf) - 1)
	}
	compact := "compact"
	_, err = adm.CreateTopic(ctx, 1, rf, map[string]*string{"cleanup.policy": &compact, "min.insync.replicas": &minISR}, l.cfg.Topic)
	switch {
	case err == nil:
		l.logger.Info("created the schema registry's topic", "replication_factor", rf, "min_insync_replicas", minISR)
	case errors.Is(err, kerr.TopicAlreadyExists):
		if err := l.checkTopic(ctx, adm); err != nil {
			return err
		}
	default:
		return fmt.Errorf("kafkalog: creating %s: %w", l.cfg.Topic, err)
	}
	l.ensured = true
	return nil
}

// checkTopic refuses an existing topic the registry cannot keep its state
// in.
func (l *Log) checkTopic(ctx context.Context, adm *kadm.Client) error {
	topics, err := adm.ListTopics(ctx, l.cfg.Topic)
	if err != nil {
		return fmt.Errorf("kafkalog: describing %s: %w", l.cfg.Topic, err)
	}
	if d, ok := topics[l.cfg.Topic]; ok && d.Err == nil && len(d.Partitions) != 1 {
		return fmt.Errorf("kafkalog: the topic %s has %d partitions; the schema registry needs exactly one (its records are one ordered history): delete it or point the registry at another topic", l.cfg.Topic, len(d.Partitions))
	}
	configs, err := adm.DescribeTopicConfigs(ctx, l.cfg.Topic)
	if err != nil {
		return fmt.Errorf("kafkalog: describing %s's configuration: %w", l.cfg.Topic, err)
	}
	rc, err := configs.On(l.cfg.Topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return fmt.Errorf("kafkalog: describing %s's configuration: %w", l.cfg.Topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil && !strings.Contains(*c.Value, "compact") {
			return fmt.Errorf("kafkalog: the topic %s has cleanup.policy=%s; the schema registry needs compact (deleting old records would lose schemas): set it with kafka-configs --alter --add-config cleanup.policy=compact", l.cfg.Topic, *c.Value)
		}
	}
	return nil
}
