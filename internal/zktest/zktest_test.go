package zktest

import (
	"testing"
	"time"

	"millrace/internal/waitfor"
)

func TestStandaloneStopRestart(t *testing.T) {
	s := Start(t)
	if mode := s.Mode(); mode != "standalone" {
		t.Fatalf("mode %q, want standalone", mode)
	}
	if out, err := fourLetterWord(s.Connect(), "ruok"); err != nil || out != "imok" {
		t.Fatalf("ruok = %q, %v", out, err)
	}
	s.Stop()
	if s.Running() {
		t.Fatal("running after Stop")
	}
	if _, err := fourLetterWord(s.Connect(), "ruok"); err == nil {
		t.Fatal("stopped server still answers")
	}
	s.Stop() // stopping twice is harmless
	s.Restart()
	if mode := s.Mode(); mode != "standalone" {
		t.Fatalf("mode after restart %q, want standalone", mode)
	}
}

func TestEnsembleLeaderFailover(t *testing.T) {
	e := StartEnsemble(t, 3)
	leader := e.Leader()
	if leader < 0 {
		t.Fatal("no leader")
	}
	followers := 0
	for i := range e.Size() {
		if e.Server(i).Mode() == "follower" {
			followers++
		}
	}
	if followers != 2 {
		t.Fatalf("%d followers, want 2", followers)
	}
	e.Stop(leader)
	// The other two elect a new leader among themselves.
	waitfor.Until(t, 30*time.Second, "a new leader", func() bool {
		next := e.Leader()
		if next == leader {
			t.Fatal("stopped node reported as leader")
		}
		return next >= 0
	})
	e.Start(leader)
	if mode := e.Server(leader).Mode(); mode != "follower" {
		t.Fatalf("old leader rejoined as %q, want follower", mode)
	}
}
