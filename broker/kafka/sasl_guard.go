package kafka

// What keeps failed SASL logins cheap, so that a flood of them cannot
// starve everyone else of CPU:
//
//   - connection.failed.authentication.delay.ms delays the answer on the
//     connection that failed, but costs nothing to a client that opens
//     many connections at once. So failed password checks are also limited
//     per client IP (millrace.sasl.failed.authentication.rate.per.ip) and
//     per user (millrace.sasl.failed.authentication.rate.per.user), each a
//     token bucket of millrace.sasl.failed.authentication.burst. A check
//     takes a token from both before it runs (PLAIN's PBKDF2, SCRAM's
//     proof) and gives them back if the password was right; without a
//     token the login fails at once, without checking anything, after the
//     same delay, and is counted as result="throttled".
//   - A login as a user that does not exist checks nothing either. Its
//     answer waits as long as a check would take (verifyCost, measured), so
//     the time of the answer does not tell which users exist.
//   - PLAIN passwords that were verified are cached briefly
//     (users.VerifiedCache, millrace.sasl.plain.cache.ms): a client that
//     logged in moments ago gets in again without PBKDF2 and without a
//     token, even while its IP or user is throttled by someone else's
//     guessing.
//   - Failures are logged at most failureLogBurst lines per
//     failureLogWindow for each user that exists, and as many for all
//     other names together, each line saying how many were not logged
//     since the one before; the metric counts every one.
//
// Memory: per-IP buckets are bounded by maxFailureBuckets (full buckets,
// which behave as fresh ones, go first); per-user buckets exist only for
// users that exist, so client-chosen names cannot grow the table.

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"millrace/broker/users"
)

// maxFailureBuckets bounds each limiter's table.
const maxFailureBuckets = 10000

// maxVerifiedEntries bounds the PLAIN cache (one entry per user).
const maxVerifiedEntries = 10000

// Failure log sampling: at most failureLogBurst Warn lines per
// failureLogWindow and user (sampledLog). 200 parallel clients guessing used
// to write 2.5 MB of log every 20 s; the counts are in
// millrace_broker_sasl_authentications_total.
const (
	failureLogBurst  = 5
	failureLogWindow = 10 * time.Second
)

// saslGuard is the broker's defence against failed logins (above).
type saslGuard struct {
	perIP, perUser *failureLimiter
	verified       *users.VerifiedCache
	log            sampledLog
	// verifyCost is what one password check took, in nanoseconds: a moving
	// average the padding of unchecked failures follows.
	verifyCost atomic.Int64
}

func newSASLGuard(cfg SASLConfig, now func() time.Time) *saslGuard {
	g := &saslGuard{
		perIP:    newFailureLimiter(float64(cfg.FailedAuthenticationRatePerIP), float64(cfg.FailedAuthenticationBurst), now),
		perUser:  newFailureLimiter(float64(cfg.FailedAuthenticationRatePerUser), float64(cfg.FailedAuthenticationBurst), now),
		verified: users.NewVerifiedCache(cfg.PlainCacheTTL, maxVerifiedEntries, now),
	}
	g.verifyCost.Store(int64(dummyCost))
	return g
}

// reserve takes a token for one password check from ip's bucket and, if
// user is not empty, from user's; false (nothing taken) if either is empty.
func (g *saslGuard) reserve(ip, user string) bool {
	if !g.perIP.take(ip) {
		return false
	}
	if user != "" && !g.perUser.take(user) {
		g.perIP.give(ip)
		return false
	}
	return true
}

// refund gives back what reserve took, after a right password.
func (g *saslGuard) refund(ip, user string) {
	g.perIP.give(ip)
	if user != "" {
		g.perUser.give(user)
	}
}

// measured folds one check's duration into verifyCost (weight 1/8).
func (g *saslGuard) measured(d time.Duration) {
	old := g.verifyCost.Load()
	g.verifyCost.Store(old + (int64(d)-old)/8)
}

// failureLimiter is a token bucket per key. rate 0 means no limit.
type failureLimiter struct {
	rate, burst float64 // tokens per second; bucket size
	now         func() time.Time

	mu      sync.Mutex // guards the following
	buckets map[string]*tokenBucket
}

type tokenBucket struct {
	tokens float64
	last   time.Time
}

func newFailureLimiter(rate, burst float64, now func() time.Time) *failureLimiter {
	if now == nil {
		now = time.Now
	}
	return &failureLimiter{rate: rate, burst: max(burst, 1), now: now, buckets: map[string]*tokenBucket{}}
}

// refillLocked brings b up to date at now.
func (fl *failureLimiter) refillLocked(b *tokenBucket, now time.Time) {
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(fl.burst, b.tokens+el*fl.rate)
	}
	b.last = now
}

// take takes a token from key's bucket, or reports that none is left.
func (fl *failureLimiter) take(key string) bool {
	if fl.rate <= 0 {
		return true
	}
	now := fl.now()
	fl.mu.Lock()
	defer fl.mu.Unlock()
	b, ok := fl.buckets[key]
	if !ok {
		if len(fl.buckets) >= maxFailureBuckets {
			fl.sweepLocked(now)
		}
		b = &tokenBucket{tokens: fl.burst, last: now}
		fl.buckets[key] = b
	}
	fl.refillLocked(b, now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// give returns a token to key's bucket.
func (fl *failureLimiter) give(key string) {
	if fl.rate <= 0 {
		return
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if b, ok := fl.buckets[key]; ok {
		b.tokens = math.Min(fl.burst, b.tokens+1)
	}
}

// sweepLocked drops full buckets (a fresh one is the same) and, if the
// table is still full, any bucket: that only forgives one client some
// failures, where refusing new keys would lock out everyone new.
func (fl *failureLimiter) sweepLocked(now time.Time) {
	for k, b := range fl.buckets {
		fl.refillLocked(b, now)
		if b.tokens >= fl.burst {
			delete(fl.buckets, k)
		}
	}
	for k := range fl.buckets {
		if len(fl.buckets) < maxFailureBuckets {
			return
		}
		delete(fl.buckets, k)
	}
}

// sampledLog lets through at most burst events per key and window and
// counts the rest, so that each line can say how many of its key went
// unlogged before it. Keys are users that exist (bounded by the users
// stored) and "" for everything else, so that a flood of made-up names
// shares one budget and cannot hide a real user's failures.
type sampledLog struct {
	mu          sync.Mutex // guards the following
	windowStart time.Time
	logged      map[string]int // lines per key in this window
	unlogged    map[string]int // events per key since its last line
}

// allow reports whether to log an event of key at now and, if so, how many
// events of key were not logged since its last line.
func (s *sampledLog) allow(key string, now time.Time, burst int, window time.Duration) (unlogged int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.windowStart) >= window || s.logged == nil {
		s.windowStart, s.logged = now, map[string]int{}
	}
	if s.unlogged == nil {
		s.unlogged = map[string]int{}
	}
	if s.logged[key] >= burst {
		s.unlogged[key]++
		return 0, false
	}
	s.logged[key]++
	unlogged = s.unlogged[key]
	delete(s.unlogged, key)
	return unlogged, true
}
