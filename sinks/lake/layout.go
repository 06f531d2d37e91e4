package lake

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"millrace/audit"
)

// Layout is where the lake keeps a topic's objects, the one definition the
// sink writes by and every reader (sinks/lakeread, pipeline/reconcile)
// reads by. Names are the same in every store (a filesystem's paths under
// its root, an S3 bucket's keys under its prefix):
//
//	<topic>/dt=YYYY-MM-DD/hr=HH/part-<partition>-<first offset>-<last offset>.parquet
//	<topic>/dt=YYYY-MM-DD/hr=HH/_SUCCESS
//	<topic>/dt=YYYY-MM-DD/part-…parquet, <topic>/dt=YYYY-MM-DD/_SUCCESS   (partition_by: day)
//
// Buckets are UTC hours, or UTC days with Day set.
type Layout struct {
	// Day is true with partition_by: day: one directory per day, no hr=.
	Day bool
}

// LayoutOf is the layout of a sink's Config.PartitionBy ("hour", "day";
// "" is the default, hour).
func LayoutOf(partitionBy string) Layout { return Layout{Day: partitionBy == "day"} }

// BucketSize is the length of a bucket.
func (l Layout) BucketSize() time.Duration {
	if l.Day {
		return 24 * time.Hour
	}
	return time.Hour
}

// Bucket is the start of the bucket that holds event time t.
func (l Layout) Bucket(t time.Time) time.Time {
	t = t.UTC()
	if l.Day {
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	}
	return t.Truncate(time.Hour)
}

// Dir is the Hive-style directory of a bucket, without a trailing slash.
func (l Layout) Dir(topic string, bucket time.Time) string {
	dir := topic + "/dt=" + bucket.Format("2006-01-02")
	if !l.Day {
		dir += "/hr=" + bucket.Format("15")
	}
	return dir
}

// DataFile is the name of the data file of partition's rows first..last in
// a bucket (FileName).
func (l Layout) DataFile(topic string, bucket time.Time, partition int32, first, last int64) string {
	return l.Dir(topic, bucket) + "/" + FileName(partition, first, last)
}

// PartitionFiles is the prefix every data file of partition in a bucket
// starts with (for listing; ParseFileName tells a partition's files from
// those of a partition whose number starts the same).
func (l Layout) PartitionFiles(topic string, bucket time.Time, partition int32) string {
	return l.Dir(topic, bucket) + "/part-" + strconv.Itoa(int(partition)) + "-"
}

// SuccessFile is the name of a bucket's completion marker.
func (l Layout) SuccessFile(topic string, bucket time.Time) string {
	return l.Dir(topic, bucket) + "/" + SuccessName
}

// ParseDir is the inverse of Dir.
func (l Layout) ParseDir(topic, dir string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(dir, topic+"/dt=")
	if !ok {
		return time.Time{}, false
	}
	layout := "2006-01-02/hr=15"
	if l.Day {
		layout = "2006-01-02"
	}
	b, err := time.Parse(layout, rest)
	return b, err == nil
}

// SuccessName is the base name of a bucket's completion marker.
const SuccessName = "_SUCCESS"

// DayPrefix is the prefix of every object of topic on day (any layout):
// listing it reads one day of the topic, however old and large the lake.
func DayPrefix(topic string, day time.Time) string {
	return topic + "/dt=" + day.UTC().Format("2006-01-02") + "/"
}

// ParseBucket returns the time span of an object from its Hive directories,
// given its name below the topic's directory (`dt=YYYY-MM-DD/hr=HH/…` an
// hour, `dt=YYYY-MM-DD/…` a day, in UTC), whichever layout wrote it; ok is
// false for a name in neither layout.
func ParseBucket(name string) (start, end time.Time, ok bool) {
	parts := strings.Split(name, "/")
	if len(parts) < 2 {
		return start, end, false
	}
	day, found := strings.CutPrefix(parts[0], "dt=")
	if !found {
		return start, end, false
	}
	if len(parts) >= 3 {
		if hour, found := strings.CutPrefix(parts[1], "hr="); found {
			t, err := time.Parse("2006-01-02T15", day+"T"+hour)
			if err != nil {
				return start, end, false
			}
			return t, t.Add(time.Hour), true
		}
	}
	t, err := time.Parse("2006-01-02", day)
	if err != nil {
		return start, end, false
	}
	return t, t.AddDate(0, 0, 1), true
}

// Hours are the audit hours (audit.Hour) of the span ParseBucket returned:
// the hours a bucket's marker declares complete.
func Hours(start, end time.Time) []string {
	var out []string
	for h := start; h.Before(end); h = h.Add(time.Hour) {
		out = append(out, audit.Hour(h))
	}
	return out
}

// FileName is the name of the file of a partition's bucket holding the
// bucket's rows from offset first to offset last of one commit window:
// `part-<partition>-<first, 20 digits>-<last, 20 digits>.parquet`. The
// padding makes a directory listing sort a partition's files by offset.
func FileName(partition int32, first, last int64) string {
	return fmt.Sprintf("part-%d-%020d-%020d.parquet", partition, first, last)
}

// ParseFileName is the inverse of FileName.
func ParseFileName(base string) (partition int32, first, last int64, ok bool) {
	rest, found := strings.CutPrefix(base, "part-")
	if !found {
		return 0, 0, 0, false
	}
	rest, found = strings.CutSuffix(rest, ".parquet")
	if !found {
		return 0, 0, 0, false
	}
	fields := strings.Split(rest, "-")
	if len(fields) != 3 || len(fields[1]) != 20 || len(fields[2]) != 20 {
		return 0, 0, 0, false
	}
	p, err1 := strconv.ParseInt(fields[0], 10, 32)
	f, err2 := strconv.ParseInt(fields[1], 10, 64)
	l, err3 := strconv.ParseInt(fields[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || p < 0 || f < 0 || l < f || strconv.Itoa(int(p)) != fields[0] {
		return 0, 0, 0, false
	}
	return int32(p), f, l, true
}

// finalNameMatcher matches the names of one partition's data files, so a
// newly assigned partition's leftovers can be found.
func finalNameMatcher(partition int32) func(name string) bool {
	return func(name string) bool {
		p, _, _, ok := ParseFileName(name[lastSlash(name)+1:])
		return ok && p == partition
	}
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}
