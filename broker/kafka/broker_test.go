package kafka

import (
	"strings"
	"testing"
)

// TestNewRefusesAPartThatCannotOpen: an authorizer with no coordination
// store to keep ACLs in fails New with an error naming the part, and the
// failed New leaves no goroutine behind (goleak checks at the package's
// end).
func TestNewRefusesAPartThatCannotOpen(t *testing.T) {
	tb := startBroker(t)
	cfg := DefaultConfig()
	cfg.Listener = "127.0.0.1:0"
	cfg.Authorizer = AuthorizerConfig{ClassName: "kafka.security.authorizer.AclAuthorizer"}
	b, err := New(cfg, Deps{Cluster: tb.cluster, Groups: tb.groups, Logs: tb.logs}, nil)
	if err == nil {
		b.Close()
		t.Fatal("New opened an authorizer without a store")
	}
	if !strings.Contains(err.Error(), "opening the authorizer") || !strings.Contains(err.Error(), "no coordination store") {
		t.Fatalf("error %q does not name the authorizer and the missing store", err)
	}
}
