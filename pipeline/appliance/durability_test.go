package appliance

import (
	"testing"

	"millrace/broker"
)

func TestEmbeddedBrokerFsyncsBeforeAcknowledging(t *testing.T) {
	c := Config{Data: t.TempDir(), Broker: BrokerConfig{Settings: map[string]string{}}}
	bc, err := c.brokerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !bc.Log.FlushOnAck {
		t.Error("the embedded broker, every topic's only replica, acknowledges from the page cache")
	}
	// The user's settings turn it off.
	c.Broker.Settings["millrace.log.flush.on.ack"] = "false"
	if bc, err := c.brokerConfig(); err != nil || bc.Log.FlushOnAck {
		t.Errorf("millrace.log.flush.on.ack=false in broker.settings: flush on ack %v, err %v", bc.Log.FlushOnAck, err)
	}
	c.Broker.Settings["millrace.log.flush.on.ack"] = "sometimes"
	if _, err := c.brokerConfig(); err == nil {
		t.Error("millrace.log.flush.on.ack=sometimes accepted")
	}
	// `millrace broker` keeps Kafka's default.
	if broker.DefaultConfig().Log.FlushOnAck {
		t.Error("the standalone broker fsyncs before acknowledging by default")
	}
}
