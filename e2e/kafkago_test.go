package e2e

// kafka-go's Conn admin calls, as its own test suite makes them: a topic
// created is listed whole by every Metadata answer that follows, and a
// deleted topic is gone from the Metadata answer right after DeleteTopics
// returns (Kafka's DelayedCreateTopics / DelayedDeleteTopics).

import (
	"errors"
	"fmt"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// kafkaGoConn dials addr with kafka-go's Conn, closed with the test.
func kafkaGoConn(t *testing.T, addr string) *kafkago.Conn {
	t.Helper()
	conn, err := kafkago.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// partitionsOf counts the partitions of topic in a Metadata answer.
func partitionsOf(parts []kafkago.Partition, topic string) int {
	n := 0
	for _, p := range parts {
		if p.Topic == topic {
			n++
		}
	}
	return n
}

// checkKafkaGoAdmin creates two topics of three partitions through conn,
// reads every topic's metadata from conn and from others for a short while
// (the creating broker must list both whole every time, the others whole or
// not at all), then deletes both and reads them back by name: none.
func checkKafkaGoAdmin(t *testing.T, conn *kafkago.Conn, others []*kafkago.Conn, rf int) {
	t.Helper()
	const partitions = 3
	a, b := fmt.Sprintf("kafkago-a-%d", time.Now().UnixNano()), fmt.Sprintf("kafkago-b-%d", time.Now().UnixNano())
	if err := conn.CreateTopics(
		kafkago.TopicConfig{Topic: a, NumPartitions: partitions, ReplicationFactor: rf},
		kafkago.TopicConfig{Topic: b, NumPartitions: partitions, ReplicationFactor: rf},
	); err != nil {
		t.Fatalf("CreateTopics: %v", err)
	}
	reads := 0
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); reads++ {
		parts, err := conn.ReadPartitions()
		if err != nil {
			t.Fatalf("ReadPartitions from the creating broker, read %d: %v", reads, err)
		}
		for _, topic := range []string{a, b} {
			if n := partitionsOf(parts, topic); n != partitions {
				t.Fatalf("read %d from the creating broker right after CreateTopics lists %s with %d partitions, want %d", reads, topic, n, partitions)
			}
		}
		for i, other := range others {
			parts, err := other.ReadPartitions()
			if err != nil {
				t.Fatalf("ReadPartitions from another broker (%d), read %d: %v", i, reads, err)
			}
			for _, topic := range []string{a, b} {
				if n := partitionsOf(parts, topic); n != 0 && n != partitions {
					t.Fatalf("read %d from another broker (%d) lists %s with %d partitions, want %d or none", reads, i, topic, n, partitions)
				}
			}
		}
	}
	t.Logf("%d metadata reads after CreateTopics", reads)

	if err := conn.DeleteTopics(a, b); err != nil {
		t.Fatalf("DeleteTopics: %v", err)
	}
	// With auto-creation on, this Metadata request creates the topics again
	// (as Kafka would) and answers LEADER_NOT_AVAILABLE without partitions.
	parts, err := conn.ReadPartitions(a, b)
	if err != nil && !errors.Is(err, kafkago.UnknownTopicOrPartition) && !errors.Is(err, kafkago.LeaderNotAvailable) {
		t.Fatalf("ReadPartitions(a, b) after DeleteTopics: %v", err)
	}
	if len(parts) != 0 {
		t.Fatalf("ReadPartitions(a, b) right after DeleteTopics lists %d partitions, want none: %v", len(parts), parts)
	}
}

// TestKafkaGoAdminSingleBroker runs kafka-go's Conn admin calls against one
// broker with auto.create.topics.enable on (the default): kafka-go's
// ReadPartitions(a, b) sends Metadata v6 with allow_auto_topic_creation.
func TestKafkaGoAdminSingleBroker(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	checkKafkaGoAdmin(t, kafkaGoConn(t, b.addr), nil, 1)
}

// TestKafkaGoAdminCluster runs them against a three-broker ZooKeeper
// cluster with auto-creation off, the topics replicated three times: the
// broker that served the request lists the change, and no broker ever lists
// a topic half.
func TestKafkaGoAdminCluster(t *testing.T) {
	t.Parallel()
	c := startLocalClusterWith(t, 3, 1, "auto.create.topics.enable=false")
	conn := kafkaGoConn(t, c.nodes[1].addr)
	others := []*kafkago.Conn{kafkaGoConn(t, c.nodes[2].addr), kafkaGoConn(t, c.nodes[3].addr)}
	checkKafkaGoAdmin(t, conn, others, 3)
}
