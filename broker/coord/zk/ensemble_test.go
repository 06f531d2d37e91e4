package zk

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"millrace/broker/coord"
	"millrace/internal/zktest"
)

// Losing one node of three changes nothing for a client that names all three
// but a transient disconnection: same session, ephemerals intact, writes go on.
func TestEnsembleSurvivesNodeLoss(t *testing.T) {
	ensemble := zktest.StartEnsemble(t, 3)
	s := connectTo(t, ensemble.Connect())
	waitState(t, s, coord.SessionConnected)
	if _, err := s.Create("/member", nil, coord.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create("/counter", []byte("0"), coord.Persistent); err != nil {
		t.Fatal(err)
	}
	id := s.SessionID()

	// Kill the node the client is connected to: the client must move.
	victim := -1
	for i := range ensemble.Size() {
		if ensemble.Server(i).Connect() == s.conn.Server() {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("client connected to %s, not an ensemble node", s.conn.Server())
	}
	ensemble.Stop(victim)

	// Writes fail at most with a lost connection while the client moves.
	deadline := time.Now().Add(waitFor)
	for n := 1; n <= 20; {
		_, err := s.Set("/counter", []byte(strconv.Itoa(n)), coord.AnyVersion)
		switch {
		case err == nil:
			n++
		case errors.Is(err, ErrConnectionLoss) && time.Now().Before(deadline):
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("write %d with node %d down: %v", n, victim, err)
		}
	}
	if got := s.SessionID(); got != id {
		t.Fatalf("session %#x after losing a node, want %#x", got, id)
	}
	// Only a transient disconnection was reported, never an expiry.
	for {
		select {
		case state := <-s.SessionEvents():
			if state == coord.SessionExpired {
				t.Fatal("session expired when one node of three stopped")
			}
			continue
		default:
		}
		break
	}
	observer := connectTo(t, ensemble.Connect())
	_, stat, err := observer.Get("/member")
	if err != nil || stat.EphemeralOwner != id {
		t.Fatalf("ephemeral after losing a node: owner %#x, err %v", stat.EphemeralOwner, err)
	}

	// The node comes back as a member and catches up.
	ensemble.Start(victim)
	if mode := ensemble.Server(victim).Mode(); mode != "follower" && mode != "leader" {
		t.Fatalf("restarted node mode %q", mode)
	}
	direct := connectTo(t, ensemble.Server(victim).Connect())
	// A write through the node orders its reads after everything before it.
	if _, err := direct.Create("/probe", nil, coord.Persistent); err != nil {
		t.Fatal(err)
	}
	data, _, err := direct.Get("/counter")
	if err != nil || string(data) != "20" {
		t.Fatalf("counter on the restarted node = %q, %v; want 20", data, err)
	}
}
