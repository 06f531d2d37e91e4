package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"millrace/internal/certs"
	"millrace/internal/waitfor"
	"millrace/pipeline/appliance"
)

// TestUpHTTPAuth runs `millrace up` with http.auth.token: generate. The
// token is made in the data directory with mode 0600; the login line
// printed to a file names the token's file and never holds the token; the
// console and /metrics answer 401 without it and 200 with it,
// while the beacon stays public; Chromium opens the login URL and
// the console renders the cluster through the cookie it set.
func TestUpHTTPAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var metricsAddr string
	cfgPath, kafkaAddr, webAddr := writeDemoConfig(t, dir, func(cfg *appliance.Config) {
		// Only the parts this test reads: the broker, the beacon, the console.
		cfg.Tail, cfg.Sinks, cfg.Demo.WriteLog = nil, nil, ""
		cfg.HTTP.Auth.Token = appliance.TokenGenerate
		metricsAddr = cfg.HTTP.MetricsListen
	})
	up := startProcess(t, "up", "up", "--config", cfgPath)
	web := "http://" + webAddr
	waitHTTP(t, up, web+"/healthz") // public, as the beacon's routes are
	up.waitLog("console login", 1, 30*time.Second)

	tokenFile := filepath.Join(dir, "data", appliance.TokenFileName)
	info, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, want 0600", info.Mode().Perm())
	}
	raw, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(raw))
	// Standard output is a file here, not a terminal: the login line says
	// where the token is instead of holding it.
	m := regexp.MustCompile(`console login\s+(\S+) \(TOKEN is in (\S+);`).FindStringSubmatch(up.log())
	if m == nil || m[1] != web+"/console?token=TOKEN" || m[2] != tokenFile {
		t.Fatalf("the login line does not point at the token file:\n%s", up.log())
	}
	loginURL := web + "/console?token=" + token

	get := func(url, bearer string) int {
		t.Helper()
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
			t.Fatalf("%s: 401 without a Bearer challenge", url)
		}
		return resp.StatusCode
	}
	private := []string{web + "/console", web + "/console/api/snapshot", web + "/console/api/metrics", "http://" + metricsAddr + "/metrics"}
	for _, url := range private {
		if code := get(url, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d, want 401", url, code)
		}
		if code := get(url, token[:len(token)-1]+"x"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d, want 401", url, code)
		}
		if code := get(url, token); code != http.StatusOK {
			t.Errorf("%s with the token: %d, want 200", url, code)
		}
	}
	if code := get(web+"/", ""); code != http.StatusOK {
		t.Errorf("the demo page: %d, want 200 without a token", code)
	}
	if !strings.Contains(up.log(), "http authentication failed") {
		t.Fatalf("failed attempts are not logged:\n%s", up.log())
	}
	// Neither a guess nor the token is in the output.
	if n := strings.Count(up.log(), token[:len(token)-1]); n != 0 {
		t.Fatalf("the token or a guess at it is in the log %d times:\n%s", n, up.log())
	}
	if g := gaugeWith(t, "http://"+metricsAddr, `millrace_http_auth_failures_total{reason="invalid"}`, token); g != "4" {
		t.Errorf("invalid attempts counted %q, want 4", g)
	}

	consoleInBrowser(t, loginURL, web, kafkaAddr)
}

// consoleInBrowser logs in to the console in Chromium through loginURL
// (web/console?token=...) and waits for the page to show the broker at
// kafkaAddr and the clicks topic: the login left the token out of the URL
// and in an HttpOnly cookie only.
func consoleInBrowser(t *testing.T, loginURL, web, kafkaAddr string) {
	t.Helper()
	browser := newBrowser(t)
	if err := chromedp.Do(browser, chromedp.Navigate(loginURL)); err != nil {
		t.Fatalf("opening the login URL: %v", err)
	}
	step, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	var brokers, topics string
	var err error
	waitfor.Until(t, 30*time.Second, "the console showing the broker and the beacon's topic", func() bool {
		brokers, err = chromedp.Run(step, chromedp.Evaluate[string](`document.querySelector("#brokers tbody").innerText`))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		topics, err = chromedp.Run(step, chromedp.Evaluate[string](`document.querySelector("#topics tbody").innerText`))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		return strings.Contains(brokers, kafkaAddr) && hasCells(topics, "clicks")
	})
	location, err := chromedp.Run(step, chromedp.Evaluate[string](`location.href`))
	if err != nil {
		t.Fatal(err)
	}
	cookies, err := chromedp.Run(step, chromedp.Evaluate[string](`document.cookie`))
	if err != nil {
		t.Fatal(err)
	}
	if location != web+"/console" || cookies != "" {
		t.Fatalf("after the login the page is at %q with script-visible cookies %q: want the token gone from the URL and an HttpOnly cookie", location, cookies)
	}
}

// gaugeWith is the value of one series on base's /metrics, read with a
// bearer token; "" if absent.
func gaugeWith(t *testing.T, base, series, token string) string {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			return v
		}
	}
	return ""
}

// TestConsoleHTTPAuthOverTLS serves `millrace console` with
// --http-token-file and --http-tls-cert (a certificate made by the test):
// it answers over HTTPS only, 401 without the token and 200 with it.
func TestConsoleHTTPAuthOverTLS(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	dir := t.TempDir()
	ca, err := certs.NewCA(dir, "console test CA")
	if err != nil {
		t.Fatal(err)
	}
	pem := filepath.Join(dir, "console.pem")
	if _, err := ca.Issue(pem, certs.Options{CommonName: "console", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: certs.Server}); err != nil {
		t.Fatal(err)
	}
	token := "console-token-0123456789"
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	console := startProcess(t, "console", "console", "-b", b.addr, "--listen", listen,
		"--http-token-file", tokenFile, "--http-tls-cert", pem)
	console.waitLog("millrace console at https://"+listen+"/console", 1, 30*time.Second)

	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	get := func(url, bearer string) int {
		t.Helper()
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/console", "/console/api/snapshot", "/metrics"} {
		url := "https://" + listen + path
		if code := get(url, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d, want 401", url, code)
		}
		if code := get(url, token); code != http.StatusOK {
			t.Errorf("%s with the token: %d, want 200", url, code)
		}
	}
	if resp, err := http.Get("http://" + listen + "/console"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP served the console")
		}
	}
}
