package txn

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/internal/waitfor"
)

// TestTransactionalIDLimits: new IDs past MaxIDsPerPrincipal of their
// principal or MaxIDs in all get POLICY_VIOLATION, IDs already stored are
// served, a coordinator started on the same store counts what is stored,
// and expired IDs make room again.
func TestTransactionalIDLimits(t *testing.T) {
	f := newFixture(t)
	limits := func(c *Config) {
		c.MaxIDs, c.MaxIDsPerPrincipal = 5, 3
		c.IDExpiration = time.Hour
		c.AbortCheckInterval = 20 * time.Millisecond
	}
	c := f.coordinator(t, limits)
	none := ProducerIDAndEpoch{ID: -1, Epoch: -1}
	init := func(c *Coordinator, principal, id string) int16 {
		t.Helper()
		_, code := c.InitProducer(principal, id, time.Minute, none)
		return code
	}
	for i := range 3 {
		if code := init(c, "User:a", fmt.Sprintf("a-%d", i)); code != 0 {
			t.Fatalf("User:a's ID %d: %v", i, kerr.ErrorForCode(code))
		}
	}
	if code := init(c, "User:a", "a-3"); code != kerr.PolicyViolation.Code {
		t.Fatalf("User:a's fourth ID: %v, want POLICY_VIOLATION", kerr.ErrorForCode(code))
	}
	if code := init(c, "User:a", "a-0"); code != 0 {
		t.Fatalf("User:a's stored ID again: %v", kerr.ErrorForCode(code))
	}
	for i := range 2 {
		if code := init(c, "User:b", fmt.Sprintf("b-%d", i)); code != 0 {
			t.Fatalf("User:b's ID %d: %v", i, kerr.ErrorForCode(code))
		}
	}
	if code := init(c, "User:c", "c-0"); code != kerr.PolicyViolation.Code {
		t.Fatalf("a sixth ID in all: %v, want POLICY_VIOLATION", kerr.ErrorForCode(code))
	}
	if _, _, err := f.store.Get(path("c-0")); err == nil {
		t.Fatal("a refused ID was stored")
	}

	// Another coordinator on the store (a restart) counts the stored IDs.
	c.Close()
	c = f.coordinator(t, limits)
	if code := init(c, "User:c", "c-0"); code != kerr.PolicyViolation.Code {
		t.Fatalf("a sixth ID after a restart: %v, want POLICY_VIOLATION", kerr.ErrorForCode(code))
	}

	// Expired IDs stop counting once a pass removed them.
	f.clock.advance(2 * time.Hour)
	waitfor.Until(t, 5*time.Second, "room for a new ID after every ID expired", func() bool { return init(c, "User:c", "c-0") == 0 })
	if all, of := c.index.counts("User:a"); all != 1 || of != 0 {
		t.Fatalf("after expiry the index counts %d IDs, %d of User:a; want 1 and 0", all, of)
	}
}

// TestIDIndexWaitsForTheFirstPass: before a pass has counted the stored
// IDs, a new ID gets COORDINATOR_LOAD_IN_PROGRESS; an ID a pass began
// before is not forgotten when that pass ends.
func TestIDIndexWaitsForTheFirstPass(t *testing.T) {
	x := newIDIndex()
	if code, _ := x.reserve("t", "User:a", 0, 10, 10); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("before the first pass: %v", kerr.ErrorForCode(code))
	}
	seq := x.beginPass()
	x.saw("stored", "User:a", seq)
	x.endPass(seq, 0)
	seq = x.beginPass()
	if code, _ := x.reserve("new", "User:a", 0, 10, 10); code != 0 {
		t.Fatalf("after the first pass: %v", kerr.ErrorForCode(code))
	}
	x.endPass(seq, 0) // saw neither: "stored" is gone, "new" was created during the pass
	if all, of := x.counts("User:a"); all != 1 || of != 1 {
		t.Fatalf("counts %d, %d of User:a; want the new ID only", all, of)
	}
	if code, logRefusal := x.reserve("more", "User:a", 0, 1, 10); code != kerr.PolicyViolation.Code || !logRefusal {
		t.Fatalf("past the bound: %v, log %v", kerr.ErrorForCode(code), logRefusal)
	}
	if _, logRefusal := x.reserve("more", "User:a", 0, 1, 10); logRefusal {
		t.Fatal("a second refusal before the next pass is logged again")
	}
	// Ownership moved (generation 1): nothing new until a pass at 1.
	if code, _ := x.reserve("moved", "User:b", 1, 10, 10); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("at a new ownership generation: %v", kerr.ErrorForCode(code))
	}
	seq = x.beginPass()
	x.endPass(seq, 1)
	if code, _ := x.reserve("moved", "User:b", 1, 10, 10); code != 0 {
		t.Fatalf("after a pass at the new generation: %v", kerr.ErrorForCode(code))
	}
}

// counts returns the IDs counted, in all and of principal.
func (x *idIndex) counts(principal string) (all, of int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.ids), x.byPrincipal[principal]
}
