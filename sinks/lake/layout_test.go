package lake

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLayout: the names of both layouts, and that the readers' parse of a
// name gives back the bucket the sink wrote it for.
func TestLayout(t *testing.T) {
	at := time.Date(2024, 5, 1, 10, 42, 7, 0, time.FixedZone("x", 3600)) // 09:42 UTC
	for _, c := range []struct {
		layout             Layout
		bucket, dir, data  string
		success, partFiles string
		hours              []string
	}{
		{LayoutOf("hour"), "2024-05-01T09:00:00Z", "clicks/dt=2024-05-01/hr=09",
			"clicks/dt=2024-05-01/hr=09/part-3-00000000000000000007-00000000000000000009.parquet",
			"clicks/dt=2024-05-01/hr=09/_SUCCESS", "clicks/dt=2024-05-01/hr=09/part-3-", []string{"2024-05-01T09"}},
		{LayoutOf("day"), "2024-05-01T00:00:00Z", "clicks/dt=2024-05-01",
			"clicks/dt=2024-05-01/part-3-00000000000000000007-00000000000000000009.parquet",
			"clicks/dt=2024-05-01/_SUCCESS", "clicks/dt=2024-05-01/part-3-", nil},
	} {
		b := c.layout.Bucket(at)
		if got := b.Format(time.RFC3339); got != c.bucket {
			t.Errorf("%+v: bucket %s, want %s", c.layout, got, c.bucket)
		}
		if got := c.layout.Dir("clicks", b); got != c.dir {
			t.Errorf("%+v: dir %s, want %s", c.layout, got, c.dir)
		}
		if got := c.layout.DataFile("clicks", b, 3, 7, 9); got != c.data {
			t.Errorf("%+v: data file %s, want %s", c.layout, got, c.data)
		}
		if got := c.layout.SuccessFile("clicks", b); got != c.success {
			t.Errorf("%+v: marker %s, want %s", c.layout, got, c.success)
		}
		if got := c.layout.PartitionFiles("clicks", b, 3); got != c.partFiles {
			t.Errorf("%+v: partition prefix %s, want %s", c.layout, got, c.partFiles)
		}
		if got, ok := c.layout.ParseDir("clicks", c.dir); !ok || !got.Equal(b) {
			t.Errorf("%+v: ParseDir(%s) = %v %v", c.layout, c.dir, got, ok)
		}
		for _, name := range []string{c.data, c.success} {
			start, end, ok := ParseBucket(name[len("clicks/"):])
			if !ok || !start.Equal(b) || end.Sub(start) != c.layout.BucketSize() {
				t.Errorf("%+v: ParseBucket(%s) = %v..%v %v", c.layout, name, start, end, ok)
			}
		}
		start, end, _ := ParseBucket(c.success[len("clicks/"):])
		hours := Hours(start, end)
		if c.hours == nil && (len(hours) != 24 || hours[0] != "2024-05-01T00" || hours[23] != "2024-05-01T23") ||
			c.hours != nil && !slices.Equal(hours, c.hours) {
			t.Errorf("%+v: hours %v", c.layout, hours)
		}
		if !strings.HasPrefix(c.data, DayPrefix("clicks", at)) {
			t.Errorf("%+v: %s is not under its day's prefix %s", c.layout, c.data, DayPrefix("clicks", at))
		}
	}
}

func TestParseBucket(t *testing.T) {
	for name, want := range map[string][2]string{
		"dt=2024-05-01/hr=10/part-0-1-2.parquet": {"2024-05-01T10:00:00Z", "2024-05-01T11:00:00Z"},
		"dt=2024-05-01/part-0-1-2.parquet":       {"2024-05-01T00:00:00Z", "2024-05-02T00:00:00Z"},
		"dt=2024-12-31/hr=23/x.parquet":          {"2024-12-31T23:00:00Z", "2025-01-01T00:00:00Z"},
		"dt=2024-05-01/hr=10/":                   {"2024-05-01T10:00:00Z", "2024-05-01T11:00:00Z"},
		"dt=2024-05-01/":                         {"2024-05-01T00:00:00Z", "2024-05-02T00:00:00Z"},
		"dt=2024-13-01/x.parquet":                {},
		"dt=2024-05-01/hr=xx/x.parquet":          {},
		"part-0-1-2.parquet":                     {},
		"year=2024/x.parquet":                    {},
	} {
		start, end, ok := ParseBucket(name)
		if ok != (want[0] != "") {
			t.Errorf("%s: ok %v", name, ok)
			continue
		}
		if ok && (start.Format(time.RFC3339) != want[0] || end.Format(time.RFC3339) != want[1]) {
			t.Errorf("%s: %v..%v, want %v", name, start, end, want)
		}
	}
}
