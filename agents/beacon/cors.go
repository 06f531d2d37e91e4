package beacon

import (
	"net/http"
	"strconv"
	"strings"
)

// CORS (Fetch standard, "CORS protocol"): a browser sends a preflight
// OPTIONS before a cross-origin POST with a JSON content type, and none
// before a "simple" text/plain POST such as navigator.sendBeacon's. The
// allow-list therefore also gates the POST itself, server-side.

// corsHeaders lists the request headers a cross-origin POST may carry
// (lower case), besides the ones browsers always allow.
var corsHeaders = map[string]bool{"content-type": true, "x-millrace-source": true}

const corsAllowHeaders = "Content-Type, X-Millrace-Source"

// originAllowed reports whether a browser origin may post events.
func (s *Server) originAllowed(origin string) bool {
	return s.anyOrig || s.origins[origin]
}

// withCORS refuses POSTs from origins not on the list and lets allowed ones
// read the answer. Requests without Origin (servers, curl, same-origin
// navigations) pass.
func (s *Server) withCORS(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// The answer depends on Origin, so caches must key on it.
		w.Header().Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		if origin != "" {
			if !s.originAllowed(origin) {
				s.metrics.corsDenied.Inc()
				s.fail(w, r, http.StatusForbidden, "origin "+strconv.Quote(origin)+" is not allowed")
				return
			}
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Expose-Headers", "Retry-After")
		}
		next(w, r)
	}
}

// preflight answers OPTIONS. An allowed preflight gets 204 with the allow
// headers; a denied one gets 403 and no Access-Control-Allow-* header, which
// is how the browser learns it may not send the request.
func (s *Server) preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Add("Vary", "Origin")
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	origin := r.Header.Get("Origin")
	method := r.Header.Get("Access-Control-Request-Method")
	if origin == "" || method == "" {
		// A plain OPTIONS, not a preflight.
		h.Set("Allow", "POST, OPTIONS")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !s.originAllowed(origin) {
		s.metrics.corsDenied.Inc()
		http.Error(w, "origin not allowed", http.StatusForbidden)
		return
	}
	if method != http.MethodPost {
		s.metrics.corsDenied.Inc()
		http.Error(w, "method not allowed", http.StatusForbidden)
		return
	}
	for _, hdr := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
		hdr = strings.ToLower(strings.TrimSpace(hdr))
		if hdr != "" && !corsHeaders[hdr] {
			s.metrics.corsDenied.Inc()
			http.Error(w, "request header "+strconv.Quote(hdr)+" not allowed", http.StatusForbidden)
			return
		}
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", strconv.Itoa(int(s.cfg.CORSMaxAge.Seconds())))
	w.WriteHeader(http.StatusNoContent)
}
