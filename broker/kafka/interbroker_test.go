package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBrokerRequest sends a request over the inter-broker client to a
// registered broker (this one) and refuses an unregistered one.
func TestBrokerRequest(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tb.broker.brokerRequest(ctx, tb.broker.cfg.BrokerID, kmsg.NewPtrMetadataRequest())
	if err != nil {
		t.Fatalf("brokerRequest: %v", err)
	}
	md := resp.(*kmsg.MetadataResponse)
	if len(md.Brokers) != 1 || md.Brokers[0].NodeID != tb.broker.cfg.BrokerID {
		t.Fatalf("metadata brokers %+v, want this broker alone", md.Brokers)
	}
	if _, err := tb.broker.brokerRequest(ctx, tb.broker.cfg.BrokerID+7, kmsg.NewPtrMetadataRequest()); err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Fatalf("request to an unregistered broker: %v", err)
	}
	tb.stop()
	if _, err := tb.broker.brokerRequest(ctx, tb.broker.cfg.BrokerID, kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("request after Close succeeded")
	}
}
