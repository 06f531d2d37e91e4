package monitor

import (
	"context"
	"embed"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

//go:embed console/index.html console/console.js console/console.css
var consoleFiles embed.FS

// Source gives the newest snapshot; *Collector is one.
type Source interface {
	Latest() Snapshot
}

// MetricsSource gives the metric history; *Collector is one.
type MetricsSource interface {
	MetricSeries(match string, limit int) SeriesList
	MetricPoints(id string) (SeriesPoints, bool)
}

// lakeReadTimeout bounds one read of the lakes' tables for the page.
const lakeReadTimeout = 30 * time.Second

// Series list limits of /console/api/metrics: the default and the most.
const (
	defaultSeriesLimit = 200
	maxSeriesLimit     = 2000
)

// Handler serves the web console under /console: the page (/console and
// /console/), its script and style sheet, /console/api/snapshot, the
// latest snapshot as JSON, /console/api/audit, the last audit (AuditView;
// audits nil means the console has no lake), /console/api/lake, the
// lakes' Iceberg tables (LakeView, when audits is also a LakeSource), and, when src is also a
// MetricsSource, the metric history: /console/api/metrics?match=M&limit=N
// (SeriesList) and /console/api/metrics/points?id=ID (SeriesPoints, 404
// for an unknown ID). The page polls them all. Everything is embedded in the binary and the page loads
// nothing else, so the console works offline. Mount it for both "/console"
// and "/console/".
func Handler(src Source, audits AuditSource) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console", serveFile("console/index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /console/{$}", serveFile("console/index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /console/console.js", serveFile("console/console.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /console/console.css", serveFile("console/console.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /console/api/snapshot", func(w http.ResponseWriter, _ *http.Request) {
		serveJSON(w, src.Latest())
	})
	mux.HandleFunc("GET /console/api/audit", func(w http.ResponseWriter, _ *http.Request) {
		if audits == nil {
			serveJSON(w, AuditView{Message: NoAuditMessage})
			return
		}
		serveJSON(w, audits.LatestAudit())
	})
	mux.HandleFunc("GET /console/api/lake", func(w http.ResponseWriter, r *http.Request) {
		lakes, ok := audits.(LakeSource)
		if !ok {
			serveJSON(w, LakeView{Message: NoTablesMessage, Lakes: []LakeTableList{}})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), lakeReadTimeout)
		defer cancel()
		serveJSON(w, lakes.LakeTables(ctx))
	})
	metrics, _ := src.(MetricsSource)
	mux.HandleFunc("GET /console/api/metrics", func(w http.ResponseWriter, r *http.Request) {
		limit := defaultSeriesLimit
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				http.Error(w, "limit must be a positive number", http.StatusBadRequest)
				return
			}
			limit = min(n, maxSeriesLimit)
		}
		if metrics == nil {
			serveJSON(w, SeriesList{Series: []SeriesInfo{}})
			return
		}
		serveJSON(w, metrics.MetricSeries(r.URL.Query().Get("match"), limit))
	})
	mux.HandleFunc("GET /console/api/metrics/points", func(w http.ResponseWriter, r *http.Request) {
		var points SeriesPoints
		ok := false
		if metrics != nil {
			points, ok = metrics.MetricPoints(r.URL.Query().Get("id"))
		}
		if !ok {
			http.Error(w, "no such series", http.StatusNotFound)
			return
		}
		serveJSON(w, points)
	})
	return mux
}

// serveJSON answers with v, which the page re-reads on every poll.
func serveJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil { // v is plain data; this is a bug, not input
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(body)
}

func serveFile(name, contentType string) http.HandlerFunc {
	body, err := consoleFiles.ReadFile(name)
	if err != nil {
		// The names are the embed list above; a mismatch fails every test.
		panic("monitor: missing embedded file " + name)
	}
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:")
		w.Write(body)
	}
}
