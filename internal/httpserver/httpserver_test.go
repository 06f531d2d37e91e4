package httpserver

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestNewSetsEveryTimeout(t *testing.T) {
	s := New(http.NotFoundHandler(), Timeouts{Write: time.Minute}, nil)
	if s.ReadHeaderTimeout != DefaultReadHeaderTimeout || s.ReadTimeout != DefaultReadTimeout ||
		s.WriteTimeout != time.Minute || s.IdleTimeout != DefaultIdleTimeout || s.MaxHeaderBytes != MaxHeaderBytes {
		t.Fatalf("server %+v", s)
	}
	if err := (Timeouts{Idle: -1}).Validate(); err == nil {
		t.Fatal("a negative timeout passed Validate")
	}
}

// A client that sends half a request line and then nothing loses its
// connection after ReadHeader, and one that stays idle after an answer
// loses it after Idle.
func TestSlowAndIdleClientsAreCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		Timeouts{ReadHeader: 200 * time.Millisecond, Idle: 200 * time.Millisecond}, nil)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	}()
	for name, send := range map[string]string{
		"slow header": "GET / HTTP/1.1\r\nHost: x\r\n",
		"idle":        "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, send); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		// The server closes the connection: reading ends (after any answer)
		// well before this deadline.
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, c)
		c.Close()
		if err != nil {
			t.Fatalf("%s: the connection was not closed by the server: %v", name, err)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("%s: closed after %v", name, el)
		}
	}
}
