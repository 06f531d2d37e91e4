package e2e

// millrace's own clients on a secured broker: the tailer ships and the sink
// lands through an SSL listener that requires client certificates, each
// with the tls: settings next to the brokers: of its YAML file.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/certs"
	"millrace/internal/clientauth"
	"millrace/sinks/parquet"
	"millrace/sinks/parquet/parquettest"
)

func TestClientsOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := certs.NewCA(filepath.Join(dir, "ca"), "millrace clients CA")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name string, opts certs.Options) string {
		path := filepath.Join(dir, name+".pem")
		if _, err := ca.Issue(path, opts); err != nil {
			t.Fatal(err)
		}
		return path
	}
	brokerPEM := issue("broker", certs.Options{CommonName: "broker", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	tailPEM := issue("tail", certs.Options{CommonName: "tail", Usage: certs.Client})
	sinkPEM := issue("sink", certs.Options{CommonName: "sink", Usage: certs.Client})

	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := startProcess(t, "broker", "broker", "--data", filepath.Join(dir, "broker"), "--id", "1",
		"--set", "listeners=SSL://"+addr, "--set", "ssl.keystore.location="+brokerPEM,
		"--set", "ssl.truststore.location="+ca.CertFile(), "--set", "ssl.client.auth=required")
	opts, err := clientauth.Settings{TLS: &clientauth.TLS{CA: ca.CertFile(), Cert: tailPEM}}.Opts()
	if err != nil {
		t.Fatal(err)
	}
	waitTLSReady(t, b, addr, opts)

	writeFile := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	logDir := filepath.Join(dir, "logs")
	if err := os.Mkdir(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile("logs/app.log", "one\ntwo\nthree\n")
	tailCfg := writeFile("tail.yaml", fmt.Sprintf(`
ship:
  brokers: [%s]
  tls: {ca: %s, cert: %s}
tail:
  start_position: beginning
  poll_interval: 100ms
`, addr, ca.CertFile(), tailPEM))
	startProcess(t, "tail", "tail", "--topic", "logs", "--data", filepath.Join(dir, "tail"), "--config", tailCfg, "--log-level", "warn",
		filepath.Join(logDir, "*.log"))

	root := filepath.Join(dir, "lake")
	sinkCfg := writeFile("sink.yaml", fmt.Sprintf(`
out: file://%s
lake:
  brokers: [%s]
  tls: {ca: %s, cert: %s}
  group: secure-sink
  topics: [logs]
  schema: log
  idle_timeout: 300ms
  session_timeout: 6s
`, root, addr, ca.CertFile(), sinkPEM))
	sink := startProcess(t, "sink", "sink", "--config", sinkCfg, "--log-level", "warn")

	deadline := time.Now().Add(60 * time.Second)
	var lines []string
	for {
		files, _ := filepath.Glob(filepath.Join(root, "logs", "dt=*", "hr=*", "*.parquet"))
		lines = lines[:0]
		for _, f := range files {
			rows, err := parquet.ReadRows[parquettest.LogRow](f)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				lines = append(lines, r.Line)
			}
		}
		if len(lines) >= 3 {
			break
		}
		select {
		case <-sink.done:
			t.Fatalf("sink exited:\n%s", tail([]byte(sink.log()), 4096))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("landed %v after 60s; sink:\n%s", lines, tail([]byte(sink.log()), 4096))
		}
	}
	slices.Sort(lines)
	if !slices.Equal(lines, []string{"one", "three", "two"}) {
		t.Errorf("landed lines %q, want one, two, three once each", lines)
	}
}

// waitTLSReady waits until a client with opts gets an answer from addr.
func waitTLSReady(t *testing.T, p *process, addr string, opts []kgo.Opt) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cl, err := kgo.NewClient(append(slices.Clip(opts), kgo.SeedBrokers(addr))...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = cl.Ping(ctx)
		cancel()
		cl.Close()
		if err == nil {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before answering on %s:\n%s", p.name, addr, tail([]byte(p.log()), 4096))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not answering on %s after 30s: %v\n%s", p.name, addr, err, tail([]byte(p.log()), 4096))
		}
	}
}
