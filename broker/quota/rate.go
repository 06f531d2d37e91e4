package quota

import (
	"math"
	"time"
)

// Kafka's sample windows (quota.window.num, quota.window.size.seconds).
const (
	// WindowNum is the number of samples a rate is measured over.
	WindowNum = 11
	// WindowSize is the span of one sample.
	WindowSize = time.Second
)

// sample is one of a rate's windows: what was recorded from start on.
type sample struct {
	start time.Time // when its first value was recorded (Kafka's lastWindowMs)
	value float64
	used  bool
}

// rate is Kafka's Rate over a SampledStat of WindowNum samples of
// WindowSize: a value goes into the current sample, a new sample starts
// when the current one is WindowSize old (reusing the oldest), and samples
// older than WindowNum windows count for nothing.
type rate struct {
	samples [WindowNum]sample
	current int
}

// record adds value at now.
func (r *rate) record(value float64, now time.Time) {
	s := &r.samples[r.current]
	if !s.used {
		*s = sample{start: now, used: true}
	} else if now.Sub(s.start) >= WindowSize {
		r.current = (r.current + 1) % WindowNum
		s = &r.samples[r.current]
		*s = sample{start: now, used: true}
	}
	s.value += value
}

// measure is the rate per second at now: the sum of the live samples
// over the window they span.
func (r *rate) measure(now time.Time) float64 {
	r.purge(now)
	var total float64
	for _, s := range r.samples {
		if s.used {
			total += s.value
		}
	}
	return total / r.windowSize(now).Seconds()
}

// purge forgets samples older than WindowNum windows, as Kafka's
// purgeObsoleteSamples does.
func (r *rate) purge(now time.Time) {
	for i := range r.samples {
		if r.samples[i].used && now.Sub(r.samples[i].start) >= WindowNum*WindowSize {
			r.samples[i] = sample{}
		}
	}
}

// windowSize is the span a rate divides by (Kafka's Rate.windowSize):
// from the oldest live sample's start to now, but at least WindowNum-1
// full windows, so a client's first burst is not measured over a few
// milliseconds and throttled for minutes.
func (r *rate) windowSize(now time.Time) time.Duration {
	oldest := now
	for _, s := range r.samples {
		if s.used && s.start.Before(oldest) {
			oldest = s.start
		}
	}
	elapsed := now.Sub(oldest)
	if full := int64(elapsed / WindowSize); full < WindowNum-1 {
		elapsed += time.Duration(WindowNum-1-full) * WindowSize
	}
	return elapsed
}

// throttle is how long a client measured at observed (per second) must
// wait for its rate to come back to bound over window, Kafka's
// QuotaUtils.throttleTime: (observed - bound) / bound * window. 0 when
// within the bound; maxThrottle (when > 0) caps it, as Kafka caps
// request_percentage at one window (boundedThrottleTime).
func throttle(observed, bound float64, window, maxThrottle time.Duration) time.Duration {
	if observed <= bound {
		return 0
	}
	limit := time.Duration(math.MaxInt64)
	if maxThrottle > 0 {
		limit = maxThrottle
	}
	if bound <= 0 {
		return limit
	}
	ms := math.Round((observed - bound) / bound * float64(window.Milliseconds()))
	if ms >= float64(limit/time.Millisecond) {
		return limit
	}
	return time.Duration(ms) * time.Millisecond
}

// bucket is KIP-599's token bucket (Kafka's TokenBucket): tokens refill
// at rate per second up to a burst of rate × WindowNum × WindowSize; a
// mutation takes its tokens even when that leaves the bucket below zero,
// and the next is refused until it is back at zero or above.
type bucket struct {
	tokens float64
	last   time.Time
}

// refill adds the tokens earned since the last update.
func (b *bucket) refill(rate float64, now time.Time) {
	burst := rate * WindowNum * WindowSize.Seconds()
	if b.last.IsZero() {
		b.tokens = burst // a new bucket starts full, as Kafka's does
	} else if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = math.Min(burst, b.tokens+rate*elapsed.Seconds())
	}
	if now.After(b.last) {
		b.last = now
	}
}

// take asks for n tokens at now (Kafka's StrictControllerMutationQuota:
// checkQuotas, then record): refused with the time until the bucket is
// back at zero when it is below zero already.
func (b *bucket) take(rate, n float64, now time.Time) (time.Duration, bool) {
	b.refill(rate, now)
	if b.tokens < 0 {
		return b.wait(rate), false
	}
	b.tokens -= n
	return 0, true
}

// wait is how long until a bucket below zero is back at zero (Kafka's
// ControllerMutationQuotaManager.throttleTime: -tokens / rate seconds).
func (b *bucket) wait(rate float64) time.Duration {
	if b.tokens >= 0 {
		return 0
	}
	if rate <= 0 {
		return WindowNum * WindowSize
	}
	return time.Duration(math.Round(-b.tokens/rate*1000)) * time.Millisecond
}
