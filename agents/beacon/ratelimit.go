package beacon

import (
	"hash/maphash"
	"math"
	"net/netip"
	"sync"
	"time"
)

// rateLimiter keeps one token bucket per client address. Memory is bounded:
// each shard holds at most maxPerShard buckets; a shard that is full first
// drops its idle buckets (those refilled to the burst, which behave exactly
// like a fresh bucket, so forgetting them changes nothing), and only if none
// is idle drops the least recently seen one. Idle buckets are also swept
// periodically, so a quiet server returns to a small map. No goroutine is
// needed: sweeping happens on the request path, amortised.
type rateLimiter struct {
	rate        float64 // tokens per second
	burst       float64
	maxPerShard int
	now         func() time.Time
	seed        maphash.Seed
	shards      [rateShards]rateShard
}

const rateShards = 16

type rateShard struct {
	mu        sync.Mutex // guards the following
	buckets   map[netip.Addr]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(rate float64, burst, maxClients int, now func() time.Time) *rateLimiter {
	rl := &rateLimiter{rate: rate, burst: float64(burst), now: now, seed: maphash.MakeSeed(),
		maxPerShard: max(1, (maxClients+rateShards-1)/rateShards)}
	for i := range rl.shards {
		rl.shards[i].buckets = make(map[netip.Addr]*bucket)
	}
	return rl
}

// allow takes one token for a. When none is left it returns false and how
// long until one is.
func (rl *rateLimiter) allow(a netip.Addr) (bool, time.Duration) {
	b := a.As16()
	sh := &rl.shards[maphash.Bytes(rl.seed, b[:])%rateShards]
	now := rl.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if now.Sub(sh.lastSweep) > rl.idleAfter() {
		rl.sweepLocked(sh, now, false)
	}
	bk, ok := sh.buckets[a]
	if !ok {
		if len(sh.buckets) >= rl.maxPerShard {
			rl.sweepLocked(sh, now, true)
		}
		bk = &bucket{tokens: rl.burst, last: now}
		sh.buckets[a] = bk
	}
	rl.refill(bk, now)
	if bk.tokens >= 1 {
		bk.tokens--
		return true, 0
	}
	wait := time.Duration(math.Ceil((1 - bk.tokens) / rl.rate * float64(time.Second)))
	return false, wait
}

func (rl *rateLimiter) refill(bk *bucket, now time.Time) {
	if el := now.Sub(bk.last).Seconds(); el > 0 {
		bk.tokens = math.Min(rl.burst, bk.tokens+el*rl.rate)
		bk.last = now
	}
}

// idleAfter is how long a bucket takes to refill completely from empty;
// after that it is indistinguishable from a new one.
func (rl *rateLimiter) idleAfter() time.Duration {
	return time.Duration(rl.burst / rl.rate * float64(time.Second))
}

// sweepLocked drops the shard's idle buckets. With mustFree, when nothing
// was idle it also drops the least recently used bucket, so the new client
// gets a slot (that client is then treated as new: a flood of distinct
// addresses can at worst give one of them a fresh burst, never grow memory).
func (rl *rateLimiter) sweepLocked(sh *rateShard, now time.Time, mustFree bool) {
	sh.lastSweep = now
	var oldest netip.Addr
	var oldestAt time.Time
	for a, bk := range sh.buckets {
		// bk.last is the time of the bucket's last request, so it also
		// orders buckets by recency.
		if bk.tokens+now.Sub(bk.last).Seconds()*rl.rate >= rl.burst {
			delete(sh.buckets, a)
			continue
		}
		if !oldest.IsValid() || bk.last.Before(oldestAt) {
			oldest, oldestAt = a, bk.last
		}
	}
	if mustFree && len(sh.buckets) >= rl.maxPerShard && oldest.IsValid() {
		delete(sh.buckets, oldest)
	}
}

// size is the number of buckets held, for tests and the metrics.
func (rl *rateLimiter) size() int {
	n := 0
	for i := range rl.shards {
		sh := &rl.shards[i]
		sh.mu.Lock()
		n += len(sh.buckets)
		sh.mu.Unlock()
	}
	return n
}
