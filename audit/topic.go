package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnsureTopic creates the audit topic unless it exists: one partition (the
// records are few, and one partition keeps every key's records in one
// order) with the cluster's default replication factor. opts are added to
// the client's: the agent's TLS and SASL options (clientauth.Settings.Opts).
func EnsureTopic(ctx context.Context, brokers []string, topic string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append(slices.Clip(opts), kgo.SeedBrokers(brokers...), kgo.ClientID("millrace-audit"))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("audit: creating topic %s: %w", topic, err)
	}
	return nil
}

// HostInstance is the default instance id of an agent without a data
// directory: its host name and listen address ("web-1@:8090").
func HostInstance(listen string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + "@" + listen
}
