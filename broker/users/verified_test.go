package users

import (
	"testing"
	"time"
)

func TestVerifiedCache(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	cred, err := Derive(SCRAMSHA512, "right", []byte("salt"), MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifiedCache(time.Minute, 2, clock)
	if v.Check("alice", "right", cred) {
		t.Fatal("an empty cache verified a password")
	}
	v.Add("alice", "right", cred)
	if !v.Check("alice", "right", cred) {
		t.Fatal("a verified password is not remembered")
	}
	if v.Check("alice", "wrong", cred) {
		t.Fatal("a wrong password matched the cached one")
	}
	if v.Check("bob", "right", cred) {
		t.Fatal("the entry of alice served bob")
	}

	// A changed credential (new salt, new keys) ends the entry at once.
	changed, err := Derive(SCRAMSHA512, "right", []byte("another salt"), MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	if v.Check("alice", "right", changed) {
		t.Fatal("the entry outlived a credential change")
	}

	// Entries expire after the TTL.
	now = now.Add(time.Minute)
	if v.Check("alice", "right", cred) {
		t.Fatal("the entry outlived its TTL")
	}

	// The cache never holds more than its bound.
	for _, u := range []string{"a", "b", "c", "d"} {
		v.Add(u, "right", cred)
	}
	if n := len(v.entries); n > 2 {
		t.Fatalf("cache holds %d entries, bound 2", n)
	}
	if !v.Check("d", "right", cred) {
		t.Fatal("the newest entry was evicted")
	}

	// The password itself is kept nowhere: entries hold its keyed hash.
	for _, e := range v.entries {
		if string(e.mac[:]) == "right" || string(e.storedKey) == "right" {
			t.Fatal("an entry holds the password")
		}
	}

	off := NewVerifiedCache(0, 2, clock)
	off.Add("alice", "right", cred)
	if off.Check("alice", "right", cred) || len(off.entries) != 0 {
		t.Fatal("a cache with TTL 0 remembered a password")
	}
}

// TestVerifiedCacheKeyedPerProcess: two caches hash the same password
// differently (a random key each), so an entry is no password oracle
// outside its process.
func TestVerifiedCacheKeyedPerProcess(t *testing.T) {
	a, b := NewVerifiedCache(time.Minute, 1, nil), NewVerifiedCache(time.Minute, 1, nil)
	if a.mac("pw") == b.mac("pw") {
		t.Fatal("two caches share a hash key")
	}
}
