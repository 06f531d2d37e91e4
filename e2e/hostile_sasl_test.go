package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestHostileSASLPlainFlood: many parallel unauthenticated PLAIN logins with
// wrong passwords: for a user that exists from three other loopback
// addresses (127.0.0.2-4), so that the user's own limit is what binds, and
// for made-up users from a fourth (127.0.0.5). Each PLAIN check is a PBKDF2; they
// used to run as fast as the broker's CPU allowed (about 516 a second, 1.4
// cores), slowing every other client and writing megabytes of log. Now,
// with the default limits (10 failed checks a second per IP and per user,
// a burst of 20): the broker checks no more passwords than the limit lets
// through, its CPU per failed attempt stays far below one PBKDF2, its log
// stays small, a client that logged in before keeps being served, and a
// new login with the right password still works.
func TestHostileSASLPlainFlood(t *testing.T) {
	t.Parallel()
	const (
		password  = "alice's right password"
		attackers = 60
		attack    = 6 * time.Second
		// A failed check's limits: the defaults, in docs/limits.md.
		ratePerIP   = 10
		ratePerUser = 10
		burst       = 20
	)
	secrets, data := t.TempDir(), t.TempDir()
	run(t, time.Minute, "", millraceBin, "user", "add", "alice", "--data", data,
		"--password-file", writeSecret(t, secrets, "alice", password))
	plainAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	saslAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := startProcess(t, "broker", "broker", "--data", data, "--id", "1", "--metrics-listen", metricsAddr,
		"--set", "listeners=PLAINTEXT://"+plainAddr+",SASL_PLAINTEXT://"+saslAddr)
	waitAnswers(t, b, plainAddr)
	metrics := "http://" + metricsAddr + "/metrics"

	login := func(pass string) []kgo.Opt {
		return []kgo.Opt{kgo.SeedBrokers(saslAddr), kgo.SASL(plain.Auth{User: "alice", Pass: pass}.AsMechanism())}
	}
	legit, err := kgo.NewClient(login(password)...)
	if err != nil {
		t.Fatal(err)
	}
	defer legit.Close()
	metadata := func(cl *kgo.Client) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		return err
	}
	if err := metadata(legit); err != nil {
		t.Fatalf("Metadata as alice before the flood: %v", err)
	}

	cpuBefore := processCPU(t, b.pid())
	logBefore := len(b.log())
	failedName := `millrace_broker_sasl_authentications_total{mechanism="PLAIN",result="failed"}`
	throttledName := `millrace_broker_sasl_authentications_total{mechanism="PLAIN",result="throttled"}`
	failedBefore := scrapeCounterOr(t, metrics, failedName)

	ctx, cancel := context.WithTimeout(context.Background(), attack)
	defer cancel()
	var attempts, accepted atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for i := range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			source := net.IPv4(127, 0, 0, byte(2+i%3))
			if i%2 == 1 {
				source = net.IPv4(127, 0, 0, 5)
			}
			dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: source}}
			for n := 0; ctx.Err() == nil; n++ {
				user := "alice"
				if i%2 == 1 {
					user = fmt.Sprintf("nobody-%d-%d", i, n)
				}
				code, err := plainAttempt(ctx, dialer, saslAddr, user, fmt.Sprintf("guess-%d-%d", i, n))
				if err != nil {
					if ctx.Err() == nil {
						errOnce.Do(func() { firstErr = err })
					}
					continue
				}
				attempts.Add(1)
				if code == 0 {
					accepted.Add(1)
				}
			}
		}()
	}

	// While the flood runs: the client that logged in before is served, and
	// a new login with the right password gets in. Alice's own failure
	// bucket is empty by now (three IPs try her at up to 10/s each), so
	// without the cache of verified PLAIN passwords it would be throttled.
	for ctx.Err() == nil {
		if err := metadata(legit); err != nil {
			t.Errorf("Metadata as alice during the flood: %v", err)
			break
		}
		fresh, err := kgo.NewClient(login(password)...)
		if err != nil {
			t.Fatal(err)
		}
		err = metadata(fresh)
		fresh.Close()
		if err != nil {
			t.Errorf("a new login as alice with the right password during the flood: %v", err)
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		t.Logf("an attempt failed below SASL (connection closed or refused): %v", firstErr)
	}
	n := attempts.Load()
	if accepted.Load() != 0 {
		t.Fatalf("%d wrong passwords were accepted", accepted.Load())
	}
	if n < 1000 {
		t.Fatalf("only %d attempts in %v: the flood did not happen", n, elapsed)
	}
	cpu := processCPU(t, b.pid()) - cpuBefore
	checked := scrapeCounterOr(t, metrics, failedName) - failedBefore
	throttled := scrapeCounterOr(t, metrics, throttledName)
	perAttempt := cpu / time.Duration(n)
	t.Logf("%d attempts in %v: %v broker CPU (%v each), %.0f checked and failed, %.0f throttled", n, elapsed, cpu, perAttempt, checked, throttled)

	// Alice's bucket lets through at most the burst plus the rate over the
	// time, and so does the bucket of the IP trying made-up users (a
	// second's slack for clocks).
	if limit := float64(2*burst) + (ratePerUser+ratePerIP)*(elapsed.Seconds()+1); checked > limit {
		t.Errorf("%.0f failed logins were answered as checked in %v; the limits allow %.0f", checked, elapsed, limit)
	}
	if checked+throttled < float64(n) {
		t.Errorf("%.0f failed and %.0f throttled logins counted for %d attempts", checked, throttled, n)
	}
	// One PBKDF2 of 4,096 SHA-512 rounds is about 3 ms of CPU here; an
	// attempt that runs none costs a connection and two small requests.
	if perAttempt > time.Millisecond {
		t.Errorf("broker CPU per failed attempt %v, want well under one PBKDF2 (1 ms bound)", perAttempt)
	}
	if grown := len(b.log()) - logBefore; grown > 16<<10 {
		t.Errorf("the broker log grew %d bytes during the flood, want under 16 KiB (sampled)", grown)
	}
	if err := metadata(legit); err != nil {
		t.Fatalf("Metadata as alice after the flood: %v", err)
	}
}

// scrapeCounterOr reads a counter, 0 while the endpoint does not have it yet.
func scrapeCounterOr(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// plainAttempt opens a connection, does SaslHandshake v1 for PLAIN and one
// SaslAuthenticate v1 as user, and returns its error code.
func plainAttempt(ctx context.Context, dialer *net.Dialer, addr, user, password string) (int16, error) {
	nc, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("guesser"))
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := rawRoundTrip(nc, f, hs, 1, hsResp); err != nil {
		return 0, err
	}
	if hsResp.ErrorCode != 0 {
		return 0, kerr.ErrorForCode(hsResp.ErrorCode)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 1, []byte("\x00"+user+"\x00"+password)
	authResp := kmsg.NewPtrSASLAuthenticateResponse()
	if err := rawRoundTrip(nc, f, auth, 2, authResp); err != nil {
		return 0, err
	}
	return authResp.ErrorCode, nil
}

// rawRoundTrip writes req and reads its response (a version without a
// flexible header: the correlation ID, then the body).
func rawRoundTrip(nc net.Conn, f *kmsg.RequestFormatter, req kmsg.Request, correlation int32, resp kmsg.Response) error {
	if _, err := nc.Write(f.AppendRequest(nil, req, correlation)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<20 {
		return fmt.Errorf("response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(nc, body); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != correlation {
		return fmt.Errorf("correlation ID %d, want %d", got, correlation)
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(body[4:])
}
