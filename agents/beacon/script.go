package beacon

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // for the tracker script
	"encoding/hex"
	"net/http"
	"time"
)

// trackerJS is the tracker served at /beacon.js.
//
//go:embed beacon.js
var trackerJS []byte

// buildScript applies the server's settings to the tracker and returns it
// with its ETag.
func buildScript(cfg Config) ([]byte, string) {
	js := trackerJS
	if cfg.HonorDoNotTrack {
		js = bytes.Replace(js, []byte("/*MILLRACE_DNT*/false"), []byte("/*MILLRACE_DNT*/true"), 1)
	}
	sum := sha256.Sum256(js)
	return js, `"` + hex.EncodeToString(sum[:8]) + `"`
}

// handleScript is GET /beacon.js. It may be cached briefly (a new version
// reaches browsers within minutes) and revalidated by ETag.
func (s *Server) handleScript(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("ETag", s.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	// Lets pages load it with crossorigin="anonymous" (for error reports).
	h.Set("Access-Control-Allow-Origin", "*")
	http.ServeContent(w, r, "beacon.js", time.Time{}, bytes.NewReader(s.script))
}
