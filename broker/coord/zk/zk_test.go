package zk

import (
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"millrace/broker/coord"
	"millrace/broker/coord/coordtest"
	"millrace/internal/zktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testSessionTimeout is short so expiry tests are quick, yet several ticks
// of the test servers so a busy machine does not expire sessions by accident.
const testSessionTimeout = 4 * time.Second

func testLogger() *slog.Logger {
	if os.Getenv("MILLRACE_ZK_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// connectTo opens a store and closes it when the test ends.
func connectTo(t *testing.T, servers string) *Store {
	t.Helper()
	s, err := Connect(servers, testSessionTimeout, testLogger())
	if err != nil {
		t.Fatalf("Connect(%s): %v", servers, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// One server serves the whole suite: each sub-test works under fresh nodes,
// as it would on a shared ensemble.
func TestConformance(t *testing.T) {
	server := zktest.Start(t)
	coordtest.Run(t, func(t *testing.T) coordtest.Connect {
		return func() (coord.Store, error) {
			return Connect(server.Connect(), testSessionTimeout, testLogger())
		}
	})
}

func TestConformanceChroot(t *testing.T) {
	server := zktest.Start(t)
	servers := server.Connect() + "/millrace/cluster-a"
	coordtest.Run(t, func(t *testing.T) coordtest.Connect {
		return func() (coord.Store, error) {
			return Connect(servers, testSessionTimeout, testLogger())
		}
	})
	// Everything the suite made lives under the chroot.
	raw := connectTo(t, server.Connect())
	names, err := raw.Children("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if name != "millrace" && name != "zookeeper" {
			t.Errorf("node /%s outside the chroot", name)
		}
	}
	if ok, _, err := raw.Exists("/millrace/cluster-a/millrace-coordtest"); err != nil || !ok {
		t.Errorf("suite root not under the chroot: exists=%v err=%v", ok, err)
	}
}
