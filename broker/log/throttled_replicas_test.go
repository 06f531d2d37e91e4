package log

import "testing"

// TestThrottledReplicas: the *.replication.throttled.replicas lists as
// Kafka writes them ("partition:broker,..." or "*"; Kafka's
// ThrottledReplicaListValidator), and which replicas they name.
func TestThrottledReplicas(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "*", "0:1", "0:1,1:2", " 0:1 , 3:0 "} {
		if err := CheckThrottledReplicas(v); err != nil {
			t.Errorf("%q: %v, want accepted", v, err)
		}
	}
	for _, v := range []string{"0", "a:1", "0:b", "0:1,", "*,0:1"} {
		if err := CheckThrottledReplicas(v); err == nil {
			t.Errorf("%q accepted, want refused", v)
		}
	}
	for _, tc := range []struct {
		list              string
		partition, broker int32
		want              bool
	}{
		{"*", 7, 3, true},
		{"0:1,1:2", 1, 2, true},
		{"0:1,1:2", 1, 1, false},
		{"", 0, 0, false},
	} {
		if got := ThrottledReplica(tc.list, tc.partition, tc.broker); got != tc.want {
			t.Errorf("ThrottledReplica(%q, %d, %d) = %v, want %v", tc.list, tc.partition, tc.broker, got, tc.want)
		}
	}
}
