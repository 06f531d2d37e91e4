package monitor

import (
	"cmp"
	"encoding/json"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// History keeps the recent points of every metric series read off the ops
// topics, for the console's metrics page and `millrace top --metrics`. It
// is bounded twice: each series is a ring of at most a fixed number of
// points (an hour at the components' 10 s interval, by default), and at
// most a fixed number of series are kept, because metric names and labels
// come from anyone who can post to /v1/metrics. At the limit a new series
// takes the place of one that has been silent longer than the window, else
// it is dropped and counted.
type History struct {
	points int           // points kept per series
	window time.Duration // how far back points are shown, and when a silent series may be replaced
	limit  int           // most series kept
	now    func() time.Time

	mu     sync.Mutex // guards the following
	series map[string]*historySeries
	// evictTried is when the last search for a silent series to replace
	// ran: at most once a second, so a flood of new series at the limit
	// costs a scan per second, not one per sample.
	evictTried time.Time
	// dropped counts samples of new series refused at the limit.
	dropped int
}

// historySeries is one series: what names it and a ring of points.
type historySeries struct {
	info SeriesInfo
	key  string        // seriesKey, to tell an ID collision from the same series
	ring []storedPoint // oldest at head once full; grows up to the limit
	head int
}

// storedPoint is a Point in 16 bytes instead of 32 (a time.Time is 24):
// 10,000 series of 720 points would otherwise take 230 MB.
type storedPoint struct {
	unixMilli int64
	value     float64
}

func (p storedPoint) point() Point { return Point{T: time.UnixMilli(p.unixMilli).UTC(), V: p.value} }

// SeriesInfo names a series and gives its newest value.
type SeriesInfo struct {
	// ID is a short stable name for the series' points endpoint: a hash
	// of source, name and labels.
	ID     string            `json:"id"`
	Name   string            `json:"name"`
	Kind   string            `json:"kind"`
	Labels map[string]string `json:"labels"`
	// Source is the process that published it ("host:millrace-up") or
	// posted it (the /v1/metrics request's source).
	Source string `json:"source"`
	Last   Point  `json:"last"`
}

// Point is one value at one time. In JSON it is [unix ms, value], with
// null for a value JSON cannot hold (NaN, infinities).
type Point struct {
	T time.Time
	V float64
}

// MarshalJSON writes [unix ms, value].
func (p Point) MarshalJSON() ([]byte, error) {
	b := append([]byte{'['}, strconv.FormatInt(p.T.UnixMilli(), 10)...)
	b = append(b, ',')
	if math.IsNaN(p.V) || math.IsInf(p.V, 0) {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendFloat(b, p.V, 'g', -1, 64)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads [unix ms, value]; null is NaN.
func (p *Point) UnmarshalJSON(b []byte) error {
	var raw [2]*float64
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw[0] != nil {
		p.T = time.UnixMilli(int64(*raw[0])).UTC()
	}
	p.V = math.NaN()
	if raw[1] != nil {
		p.V = *raw[1]
	}
	return nil
}

// SeriesList is the answer to a series query.
type SeriesList struct {
	Series []SeriesInfo `json:"series"`
	// Matched counts the series that matched, of which Series holds the
	// first (by name, labels, source) up to the query's limit.
	Matched int `json:"matched"`
	// Total counts the series kept; Limit is the most kept; Dropped
	// counts samples of series refused at the limit.
	Total   int `json:"total"`
	Limit   int `json:"limit"`
	Dropped int `json:"dropped"`
}

// SeriesPoints is one series with its points in the window, oldest first.
type SeriesPoints struct {
	SeriesInfo
	Points []Point `json:"points"`
	// WindowSeconds is how far back points are kept.
	WindowSeconds float64 `json:"window_seconds"`
}

// NewHistory keeps up to points points per series, shown for window, and
// up to limit series.
func NewHistory(points int, window time.Duration, limit int) *History {
	return &History{points: max(points, 1), window: window, limit: limit, now: time.Now, series: make(map[string]*historySeries)}
}

// seriesID is the short name of a series key.
func seriesID(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return strconv.FormatUint(h.Sum64(), 16)
}

// add records one sample. A sample older than its series' newest point
// is ignored (the topics' partitions interleave); one at the same time
// replaces it.
func (h *History) add(s metricSample) {
	key := seriesKey(s.Source, s.Name, s.Labels)
	id := seriesID(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	hs := h.series[id]
	if hs != nil && hs.key != key {
		h.dropped++ // a 64-bit hash collision: keep the series that came first
		return
	}
	if hs == nil {
		if len(h.series) >= h.limit && !h.evictSilentLocked() {
			h.dropped++
			return
		}
		labels := s.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		hs = &historySeries{key: key, ring: make([]storedPoint, 0, min(h.points, 16)),
			info: SeriesInfo{ID: id, Name: s.Name, Kind: s.Kind, Labels: labels, Source: s.Source}}
		h.series[id] = hs
	}
	p := storedPoint{s.TS.UnixMilli(), s.Value}
	if len(hs.ring) > 0 {
		// Times are kept to the millisecond, as the page shows them.
		switch last := hs.info.Last.T.UnixMilli(); {
		case p.unixMilli < last:
			return
		case p.unixMilli == last:
			hs.ring[(hs.head+len(hs.ring)-1)%len(hs.ring)] = p
			hs.info.Last = p.point()
			return
		}
	}
	if len(hs.ring) < h.points {
		hs.ring = append(hs.ring, p)
	} else {
		hs.ring[hs.head] = p
		hs.head = (hs.head + 1) % len(hs.ring)
	}
	hs.info.Last, hs.info.Kind = p.point(), s.Kind
}

// evictSilentLocked removes the series silent longest, if it has been
// silent for longer than the window.
func (h *History) evictSilentLocked() bool {
	now := h.now()
	if now.Sub(h.evictTried) < time.Second {
		return false
	}
	h.evictTried = now
	var oldest *historySeries
	for _, hs := range h.series {
		if oldest == nil || hs.info.Last.T.Before(oldest.info.Last.T) {
			oldest = hs
		}
	}
	if oldest == nil || now.Sub(oldest.info.Last.T) <= h.window {
		return false
	}
	delete(h.series, oldest.info.ID)
	return true
}

// Series lists the series whose name, a label (as name=value or value) or
// source contains match (case-insensitive; empty matches all), sorted by
// name, labels and source, at most limit of them (0: all).
func (h *History) Series(match string, limit int) SeriesList {
	match = strings.ToLower(match)
	h.mu.Lock()
	out := SeriesList{Series: []SeriesInfo{}, Total: len(h.series), Limit: h.limit, Dropped: h.dropped}
	for _, hs := range h.series {
		if matches(hs.info, match) {
			info := hs.info
			info.Labels = maps.Clone(info.Labels)
			out.Series = append(out.Series, info)
		}
	}
	h.mu.Unlock()
	slices.SortFunc(out.Series, func(a, b SeriesInfo) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(LabelText(a.Labels), LabelText(b.Labels)), cmp.Compare(a.Source, b.Source))
	})
	out.Matched = len(out.Series)
	if limit > 0 && len(out.Series) > limit {
		out.Series = out.Series[:limit]
	}
	return out
}

func matches(info SeriesInfo, match string) bool {
	if match == "" || strings.Contains(strings.ToLower(info.Name), match) || strings.Contains(strings.ToLower(info.Source), match) {
		return true
	}
	for k, v := range info.Labels {
		if strings.Contains(strings.ToLower(k+"="+v), match) {
			return true
		}
	}
	return false
}

// Points returns a series' points no older than the window before its
// newest point, oldest first; false when no series has the ID.
func (h *History) Points(id string) (SeriesPoints, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hs := h.series[id]
	if hs == nil {
		return SeriesPoints{}, false
	}
	out := SeriesPoints{SeriesInfo: hs.info, WindowSeconds: h.window.Seconds(), Points: make([]Point, 0, len(hs.ring))}
	out.Labels = maps.Clone(out.Labels)
	from := hs.info.Last.T.Add(-h.window).UnixMilli()
	for i := range hs.ring {
		p := hs.ring[(hs.head+i)%len(hs.ring)]
		if p.unixMilli >= from {
			out.Points = append(out.Points, p.point())
		}
	}
	return out, true
}

// LabelText writes labels as Prometheus does, in key order: {a="1",b="2"};
// "" for none. Values are quoted with Go escapes and keys made printable,
// so the text is safe on a terminal.
func LabelText(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(labels)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(printable(k))
		b.WriteByte('=')
		b.WriteString(strconv.Quote(labels[k]))
	}
	b.WriteByte('}')
	return b.String()
}
