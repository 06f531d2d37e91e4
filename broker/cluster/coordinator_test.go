package cluster

import (
	"fmt"
	"testing"
)

// Groups spread over the live brokers, and when a broker goes only its own
// groups move; when it returns they come back.
func TestGroupCoordinatorSpreadsAndMovesOnlyTheDeadBrokersGroups(t *testing.T) {
	all := []BrokerInfo{{ID: 1}, {ID: 2}, {ID: 3}}
	const groups = 3000
	before := map[string]int32{}
	counts := map[int32]int{}
	for i := range groups {
		id := fmt.Sprint("group-", i)
		c, ok := groupCoordinator(id, all)
		if !ok {
			t.Fatal("no coordinator among three brokers")
		}
		before[id] = c.ID
		counts[c.ID]++
	}
	for _, b := range all {
		if n := counts[b.ID]; n < groups/3*8/10 || n > groups/3*12/10 {
			t.Errorf("broker %d coordinates %d of %d groups: %v", b.ID, n, groups, counts)
		}
	}
	without2 := []BrokerInfo{{ID: 1}, {ID: 3}}
	for id, was := range before {
		now, _ := groupCoordinator(id, without2)
		if was != 2 && now.ID != was {
			t.Fatalf("%s moved from live broker %d to %d when broker 2 went", id, was, now.ID)
		}
		if now.ID == 2 {
			t.Fatalf("%s is coordinated by the dead broker", id)
		}
		if back, _ := groupCoordinator(id, all); back.ID != was {
			t.Fatalf("%s: %d, then %d when broker 2 returned", id, was, back.ID)
		}
	}
	if _, ok := groupCoordinator("g", nil); ok {
		t.Error("a coordinator with no live broker")
	}
}
