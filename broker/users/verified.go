package users

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"sync"
	"time"
)

// VerifiedCache remembers, briefly, the PLAIN passwords that were verified.
//
// Why: a PLAIN login is checked against the user's SCRAM credential, so each
// one derives the key again with PBKDF2 (4,096 to 16,384 rounds, a few
// milliseconds of CPU). Kafka's PLAIN callback compares against passwords
// kept in its JAAS file and needs no cache; a SCRAM-backed PLAIN does. A
// client that opens many connections, or re-authenticates (KIP-368), would
// pay PBKDF2 every time, and during a flood of failed logins (which the
// broker throttles) a legitimate client that logged in moments ago gets in
// again at the cost of one HMAC.
//
// What is kept: per user, an HMAC-SHA256 of the password under a key drawn
// at random when the cache is made (never stored, never the same in two
// processes), the credential's stored key it was verified against, and an
// expiry. The password itself is never kept. An entry is used only while it
// is younger than the TTL and the user's current credential is the one it
// was verified against, so a changed password or a deleted user stops it at
// once. Only successes are cached: a wrong password never enters, so the
// cache holds at most one entry per real user, and is bounded besides.
type VerifiedCache struct {
	ttl        time.Duration
	maxEntries int
	now        func() time.Time
	key        [32]byte

	mu      sync.Mutex // guards the following
	entries map[string]verifiedEntry
}

type verifiedEntry struct {
	mac       [sha256.Size]byte // HMAC-SHA256(key, password)
	storedKey []byte            // of the credential the password was verified against
	expires   time.Time
}

// NewVerifiedCache returns a cache whose entries last ttl (0 turns it off)
// and that holds at most maxEntries users; now is the clock, time.Now if
// nil.
func NewVerifiedCache(ttl time.Duration, maxEntries int, now func() time.Time) *VerifiedCache {
	if now == nil {
		now = time.Now
	}
	v := &VerifiedCache{ttl: ttl, maxEntries: max(maxEntries, 1), now: now, entries: map[string]verifiedEntry{}}
	if _, err := rand.Read(v.key[:]); err != nil {
		// No randomness: a predictable key would make the entries a
		// password oracle for anyone reading memory. Cache nothing.
		v.ttl = 0
	}
	return v
}

func (v *VerifiedCache) mac(password string) [sha256.Size]byte {
	m := hmac.New(sha256.New, v.key[:])
	m.Write([]byte(password))
	var out [sha256.Size]byte
	m.Sum(out[:0])
	return out
}

// Check reports whether password was verified for user, against cred (the
// user's current credential), within the TTL.
func (v *VerifiedCache) Check(user, password string, cred Credential) bool {
	if v.ttl <= 0 {
		return false
	}
	mac := v.mac(password)
	v.mu.Lock()
	e, ok := v.entries[user]
	if ok && !v.now().Before(e.expires) {
		delete(v.entries, user)
		ok = false
	}
	v.mu.Unlock()
	return ok && subtle.ConstantTimeCompare(e.storedKey, cred.StoredKey) == 1 &&
		subtle.ConstantTimeCompare(e.mac[:], mac[:]) == 1
}

// Add records that password was verified for user against cred.
func (v *VerifiedCache) Add(user, password string, cred Credential) {
	if v.ttl <= 0 {
		return
	}
	now := v.now()
	e := verifiedEntry{mac: v.mac(password), storedKey: append([]byte(nil), cred.StoredKey...), expires: now.Add(v.ttl)}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.entries[user]; !ok && len(v.entries) >= v.maxEntries {
		for u, old := range v.entries {
			if !now.Before(old.expires) {
				delete(v.entries, u)
			}
		}
		// Still full: forget any one. It only costs its user one PBKDF2.
		for u := range v.entries {
			if len(v.entries) < v.maxEntries {
				break
			}
			delete(v.entries, u)
		}
	}
	v.entries[user] = e
}
