package cluster

import (
	"errors"
	"math"
	"runtime"
	"testing"
)

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestPartitionLimits(t *testing.T) {
	e := openEnv(t, t.TempDir())
	if err := e.c.Register("h", 1, ""); err != nil {
		t.Fatal(err)
	}
	e.c.cfg.MaxPartitionsPerTopic = 4
	e.c.cfg.MaxPartitions = 6

	// A wire count far above the limit is refused before anything is sized
	// from it, validate_only or not.
	for _, validateOnly := range []bool{true, false} {
		var err error
		n := allocated(func() {
			_, err = e.c.CreateTopic(TopicSpec{Name: "huge", Partitions: math.MaxInt32, ReplicationFactor: 1}, validateOnly)
		})
		if !errors.Is(err, ErrInvalidPartitions) {
			t.Fatalf("validateOnly=%v: %v, want ErrInvalidPartitions", validateOnly, err)
		}
		if n > 1<<20 {
			t.Fatalf("validateOnly=%v: refusing allocated %d bytes", validateOnly, n)
		}
	}
	if _, ok := e.c.Topic("huge"); ok {
		t.Fatal("the refused topic exists")
	}
	assignment := map[int32][]int32{0: {0}, 1: {0}, 2: {0}, 3: {0}, 4: {0}}
	if _, err := e.c.CreateTopic(TopicSpec{Name: "assigned", Partitions: -1, ReplicationFactor: -1, Assignment: assignment}, false); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("explicit assignment of 5 partitions: %v, want ErrInvalidPartitions", err)
	}

	// At the per-topic limit: fine.
	if _, err := e.c.CreateTopic(TopicSpec{Name: "a", Partitions: 4, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	// The cluster holds 4 of 6: 3 more is over millrace.max.partitions.
	if _, err := e.c.CreateTopic(TopicSpec{Name: "b", Partitions: 3, ReplicationFactor: 1}, true); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("over the cluster limit: %v, want ErrPolicyViolation", err)
	}
	if _, err := e.c.CreateTopic(TopicSpec{Name: "b", Partitions: 2, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	// CreatePartitions: the per-topic limit first, then the cluster's.
	var err error
	n := allocated(func() { _, err = e.c.CreatePartitions("b", math.MaxInt32, nil, true) })
	if !errors.Is(err, ErrInvalidPartitions) || n > 1<<20 {
		t.Fatalf("growing to MaxInt32: %v after %d bytes, want ErrInvalidPartitions at once", err, n)
	}
	if _, err := e.c.CreatePartitions("b", 3, nil, false); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("growing past the cluster limit: %v, want ErrPolicyViolation", err)
	}
	if err := e.c.DeleteTopic("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreatePartitions("b", 4, nil, false); err != nil {
		t.Fatalf("growing within the limits after a deletion freed room: %v", err)
	}
}

func TestPartitionLimitsConfig(t *testing.T) {
	cfg := DefaultConfig()
	if l := (Config{}).partitionLimits(); l != (partitionLimits{DefaultMaxPartitionsPerTopic, DefaultMaxPartitionsPerRequest, DefaultMaxPartitions}) {
		t.Fatalf("zero config limits %+v, want the defaults", l)
	}
	for name, mutate := range map[string]func(*Config){
		"negative per topic":   func(c *Config) { c.MaxPartitionsPerTopic = -1 },
		"negative per request": func(c *Config) { c.MaxPartitionsPerRequest = -1 },
		"negative total":       func(c *Config) { c.MaxPartitions = -1 },
		"default above limit":  func(c *Config) { c.DefaultPartitions, c.MaxPartitionsPerTopic = 8, 4 },
	} {
		c := cfg
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
