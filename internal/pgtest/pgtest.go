// Package pgtest starts a real PostgreSQL server for tests: the Debian
// package's (`postgresql`, which `make deps` installs), with its own
// temporary data directory, on a free loopback port, stopped when the test
// ends. It is what the Iceberg SQL catalog on PostgreSQL is tested against.
package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to wait for the server

	"millrace/internal/waitfor"
)

// Start starts a PostgreSQL server of Debian's postgresql package
// on a loopback port, with its own data directory, for the test's life, and
// returns its URL. PostgreSQL refuses to run as root, so as root the server
// runs as the package's postgres user.
func Start(t testing.TB) string {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatal("postgres: no /usr/lib/postgresql/*/bin/initdb: run `make deps`, which installs the Debian package postgresql")
	}
	bin := filepath.Dir(bins[len(bins)-1])
	// Not t.TempDir: its parent is private to this user, and the server's
	// user must reach the data directory.
	dir, err := os.MkdirTemp("", "millrace-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// As root, the server's commands run as the postgres user; the server
	// is then this process's child itself, so the cleanup's signal reaches it.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("postgres: running as root needs the postgres user of the postgresql package: %v", err)
		}
		uid, err1 := strconv.ParseUint(pg.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(pg.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			t.Fatalf("postgres: user postgres has uid %q, gid %q", pg.Uid, pg.Gid)
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
	}
	as := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd
	}
	data := filepath.Join(dir, "data")
	if out, err := as("initdb", "--no-sync", "--auth=trust", "--username=millrace", "--encoding=UTF8", "-D", data).CombinedOutput(); err != nil {
		t.Fatalf("postgres: initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	server := as("postgres", "-D", data, "-k", dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "logging_collector=off")
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	server.Stdout, server.Stderr = logFile, logFile
	if err := server.Start(); err != nil {
		t.Fatalf("postgres: start: %v", err)
	}
	t.Cleanup(func() {
		// SIGINT is PostgreSQL's fast shutdown: it ends open sessions.
		if err := server.Process.Signal(syscall.SIGINT); err != nil {
			t.Errorf("postgres: stop: %v", err)
		}
		if err := server.Wait(); err != nil {
			t.Logf("postgres: %v", err)
		}
		logFile.Close()
	})
	url := fmt.Sprintf("postgres://millrace@127.0.0.1:%d/postgres?sslmode=disable", port)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	waitfor.Until(t, 30*time.Second, "postgres accepting connections", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		return db.PingContext(ctx) == nil
	})
	return url
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
