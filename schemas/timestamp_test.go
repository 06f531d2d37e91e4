package schemas

import (
	"math/rand"
	"testing"
	"time"
)

// checkTimestamp compares parseTimestamp with time.Parse on one input.
func checkTimestamp(t *testing.T, s string) {
	t.Helper()
	got, ok := parseTimestamp([]byte(s))
	want, err := time.Parse(time.RFC3339Nano, s)
	switch {
	case ok != (err == nil):
		t.Fatalf("%q: parsed %v, time.Parse error %v", s, ok, err)
	case ok && got != want.UnixMicro():
		t.Fatalf("%q: %d µs, time.Parse gives %d", s, got, want.UnixMicro())
	}
}

func TestParseTimestampMatchesTimeParse(t *testing.T) {
	for _, s := range []string{
		"2024-05-01T10:00:00Z", "2024-05-01T10:00:00.1Z", "2024-05-01T10:00:00.123456789Z",
		"2024-05-01T10:00:00.1234567Z", "1970-01-01T00:00:00Z", "1969-12-31T23:59:59.999999Z",
		"0000-01-01T00:00:00Z", "0000-02-29T12:00:00Z", "9999-12-31T23:59:59.999999999Z",
		"2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2000-02-29T00:00:00Z",
		"2024-04-31T00:00:00Z", "2024-13-01T00:00:00Z", "2024-00-01T00:00:00Z", "2024-01-00T00:00:00Z",
		"2024-05-01T24:00:00Z", "2024-05-01T10:60:00Z", "2024-05-01T10:00:60Z",
		"2024-05-01T10:00:00.Z", "2024-05-01T10:00:00.1234567890Z", "2024-05-01T10:00:00,5Z",
		"2024-05-01T10:00:00+02:00", "2024-05-01T10:00:00.5-07:30", "2024-05-01t10:00:00z",
		"2024-05-01 10:00:00Z", "2024-5-01T10:00:00Z", "+024-05-01T10:00:00Z", "2024-05-01T10:00:0aZ",
		"2024-05-01T10:00:00", "2024-05-01", "", "Z",
	} {
		checkTimestamp(t, s)
	}
	rng := rand.New(rand.NewSource(1))
	for range 100_000 {
		ts := time.Unix(rng.Int63n(253402300800+62135596800)-62135596800, rng.Int63n(1e9)).UTC()
		s := ts.Format("2006-01-02T15:04:05")
		if n := rng.Intn(10); n > 0 {
			s += "." + ts.Format(".000000000")[1:1+n]
		}
		checkTimestamp(t, s+"Z")
	}
}

func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2024-05-01T10:00:00.123Z", "0000-02-29T00:00:00Z", "2024-05-01T10:00:00+02:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkTimestamp(t, s)
	})
}
