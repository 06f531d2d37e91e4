// Package gcfloor keeps the Go garbage collector from running on a small
// heap many times a second.
//
// The collector's goal is GOGC percent above the heap that was live after
// the last cycle. A broker's live heap is a few MiB, and every request
// allocates some hundred bytes (its parsed form, its response), so at
// tens of thousands of requests a second the default GOGC of 100 starts a
// cycle several times a second. Each cycle takes a quarter of the cores for
// a few milliseconds and holds up requests that need them, which shows in
// the latency tail. The JVM answers this with a fixed heap (Kafka's
// default is 1 GiB); here the goal is kept at least at a floor instead:
// after every cycle the GC percentage is set so that the next goal is the
// floor while twice the live heap is below it, and GOGC's 100 above that,
// so a large heap is collected exactly as before. The price is up to the
// floor in uncollected garbage in the resident set.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// DefaultFloor is the heap goal a broker keeps at least: a few seconds of
// request garbage at full load, small next to any machine that runs one.
const DefaultFloor = 64 << 20

// defaultPercent is GOGC's default.
const defaultPercent = 100

// liveHeap is the runtime metric of the heap marked live by the last cycle.
const liveHeap = "/gc/heap/live:bytes"

// Keep holds the collector's goal at floor bytes or more until stop is
// called, unless GOGC is set in the environment (the operator's choice
// stands). It adjusts after each cycle, so the first cycle runs as usual.
func Keep(floor uint64) (stop func()) {
	if os.Getenv("GOGC") != "" || floor == 0 {
		return func() {}
	}
	k := &keeper{floor: floor, percent: defaultPercent}
	k.arm()
	return func() {
		if !k.stopped.Swap(true) {
			debug.SetGCPercent(defaultPercent)
		}
	}
}

// keeper adjusts the GC percentage after every cycle.
type keeper struct {
	floor   uint64
	stopped atomic.Bool
	percent int // last set; only the cleanup (one at a time) touches it
}

// sentinel is a heap object whose only purpose is to become garbage: the
// cleanup attached to it runs after the cycle that finds it unreachable.
// Sixteen bytes keep it out of the tiny allocator, whose shared blocks
// would delay that.
type sentinel struct{ _ [16]byte }

func (k *keeper) arm() {
	runtime.AddCleanup(new(sentinel), func(k *keeper) { k.afterCycle() }, k)
}

func (k *keeper) afterCycle() {
	if k.stopped.Load() {
		return
	}
	sample := []metrics.Sample{{Name: liveHeap}}
	metrics.Read(sample)
	if sample[0].Value.Kind() == metrics.KindUint64 {
		if p := percentFor(sample[0].Value.Uint64(), k.floor); p != k.percent {
			debug.SetGCPercent(p)
			k.percent = p
		}
	}
	k.arm()
}

// percentFor is the GC percentage that puts the next goal at floor for a
// live heap of live bytes, or GOGC's default once that is above floor.
func percentFor(live, floor uint64) int {
	if live == 0 {
		live = 1
	}
	if live*(100+defaultPercent)/100 >= floor {
		return defaultPercent
	}
	return int(floor*100/live) - 100
}
