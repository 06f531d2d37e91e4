package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"millrace/audit"
	"millrace/internal/clientauth"
	"millrace/store"
)

// TestRunAuthenticates reads the audit topic of a broker that requires
// SASL with Options.Security, and fails without it.
func TestRunAuthenticates(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, audit.Topic),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "auditor", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lake, err := store.NewFile(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := Options{Brokers: c.ListenAddrs(),
		Security: clientauth.Settings{SASL: &clientauth.SASL{Mechanism: "SCRAM-SHA-512", Username: "auditor", Password: "pw"}}}
	a, err := Load(ctx, o)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	r, err := a.Judge(ctx, lake, "file:///lake")
	if err != nil {
		t.Fatalf("Judge: %v", err)
	}
	if len(r.Lines) != 0 || r.SkippedRecords != 0 {
		t.Errorf("report of an empty audit topic: %+v", r)
	}

	o.Security.SASL.Password = "wrong"
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := Load(short, o); err == nil {
		t.Error("Load read the audit topic with a wrong password")
	}
	o.Security.SASL.Mechanism = "GSSAPI"
	if _, err := Load(ctx, o); err == nil || !strings.Contains(err.Error(), "audit: sasl: mechanism") {
		t.Errorf("Load with an unknown mechanism: %v", err)
	}
}
