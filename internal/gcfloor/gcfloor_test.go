package gcfloor

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"millrace/internal/waitfor"
)

func TestPercentFor(t *testing.T) {
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{2 << 20, 64 << 20, 3100}, // goal 2 MiB × 32 = 64 MiB
		{16 << 20, 64 << 20, 300},
		{32 << 20, 64 << 20, 100}, // twice the live heap reaches the floor
		{500 << 20, 64 << 20, 100},
		{0, 64 << 20, 64<<20*100 - 100},
	} {
		if got := percentFor(c.live, c.floor); got != c.want {
			t.Errorf("percentFor(%d, %d) = %d, want %d", c.live, c.floor, got, c.want)
		}
	}
}

// gogc reads the GC percentage in force.
func gogc() uint64 {
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// With a small live heap and a floor far above it, a stream of garbage
// runs far fewer collections than with the default GOGC, and stop puts the
// default back.
func TestKeepCutsCycles(t *testing.T) {
	t.Setenv("GOGC", "")
	var sink []byte
	// Garbage is made 512 bytes at a time until the default GOGC has run
	// plainCycles collections (however large the test binary's heap is
	// then), and the same amount again under the floor.
	const plainCycles = 20
	var made int
	runtime.GC() // start from a finished cycle
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	after = before
	for after.NumGC-before.NumGC < plainCycles {
		for range 10_000 {
			sink = make([]byte, 512)
		}
		made += 10_000
		runtime.ReadMemStats(&after)
	}
	plain := after.NumGC - before.NumGC
	cycles := func() uint32 {
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range made {
			sink = make([]byte, 512)
		}
		runtime.ReadMemStats(&after)
		return after.NumGC - before.NumGC
	}
	stop := Keep(256 << 20)
	// The percentage changes after the first cycle that follows Keep.
	waitfor.Until(t, 5*time.Second, "a changed GC percentage", func() bool {
		if gogc() != defaultPercent {
			return true
		}
		runtime.GC() // the change comes with a cycle
		return false
	})
	kept := cycles()
	stop()
	_ = sink
	if got := gogc(); got != defaultPercent {
		t.Errorf("after stop the GC percentage is %d, want %d", got, defaultPercent)
	}
	t.Logf("%d cycles without the floor, %d with it, over %d MiB of garbage", plain, kept, made*512>>20)
	if kept*5 > plain {
		t.Fatalf("%d cycles with the floor against %d without; want at most a fifth", kept, plain)
	}
}

// GOGC in the environment is the operator's choice: Keep leaves it.
func TestKeepLeavesGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	stop := Keep(256 << 20)
	defer stop()
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond) // Keep acts in a cleanup that runs after a cycle: give it the chance it would take
	}
	if got := gogc(); got != defaultPercent {
		t.Fatalf("GC percentage %d with GOGC set, want it left at %d", got, defaultPercent)
	}
}
