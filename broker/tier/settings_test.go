package tier

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestConfigValidate: tiered storage needs a store URL the store layer
// opens; the intervals must be positive.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		set     map[string]string
		wantErr string
	}{
		{"off by default", nil, ""},
		{"on without a URL", map[string]string{"remote.log.storage.system.enable": "true"}, "needs millrace.remote.storage.url"},
		{"s3", map[string]string{"remote.log.storage.system.enable": "true", "millrace.remote.storage.url": "s3://bucket/tiered"}, ""},
		{"file", map[string]string{"remote.log.storage.system.enable": "true", "millrace.remote.storage.url": "file:///var/tiered"}, ""},
		{"another scheme", map[string]string{"remote.log.storage.system.enable": "true", "millrace.remote.storage.url": "hdfs://nn/tiered"}, "must be s3://"},
		{"zero interval", map[string]string{"remote.log.manager.task.interval.ms": "0"}, "must be positive"},
		{"zero grace", map[string]string{"millrace.remote.storage.sweep.grace.ms": "0"}, "must be positive"},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		for name, v := range c.set {
			if ok, err := Settings.Set(&cfg, name, v); !ok || err != nil {
				t.Fatalf("%s: Set(%s, %s): %v, %v", c.name, name, v, ok, err)
			}
		}
		err := cfg.Validate()
		if (c.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", c.name, err, c.wantErr)
		}
	}
}

// TestStateFormat pins the remote state's JSON, which the read side and
// operators read (the format is in state.go's header).
func TestStateFormat(t *testing.T) {
	t.Parallel()
	st := State{TopicID: EncodeTopicID(testTopicID), LeaderEpoch: 3, LogStartOffset: 5, Segments: []Segment{{
		BaseOffset: 5, LastOffset: 9, LeaderEpoch: 2, MaxTimestamp: 1700000000000, Size: 1234,
		Key: SegmentKey("clicks", EncodeTopicID(testTopicID), 7, 5, 9),
	}}}
	got, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"topic_id":"AQIDBAUGBwgJCgsMDQ4PEA","leader_epoch":3,"log_start_offset":5,"segments":[` +
		`{"base_offset":5,"last_offset":9,"leader_epoch":2,"max_timestamp":1700000000000,"size":1234,` +
		`"key":"clicks-AQIDBAUGBwgJCgsMDQ4PEA/7/00000000000000000005-00000000000000000009"}]}`
	if string(got) != want {
		t.Fatalf("state JSON\n got %s\nwant %s", got, want)
	}
	if StatePath("clicks", 7) != "/millrace/tier/clicks/7" {
		t.Fatalf("state path %s", StatePath("clicks", 7))
	}
	if st.End() != 10 || (State{LogStartOffset: 12}).End() != 12 {
		t.Fatalf("End: %d, %d", st.End(), (State{LogStartOffset: 12}).End())
	}
}
