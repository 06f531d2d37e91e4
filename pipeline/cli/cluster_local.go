package cli

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"millrace/internal/durable"
)

// The local cluster of deployments/local/up.sh (`make cluster`): a
// directory with a shell-sourceable state file (ports, process IDs and
// each broker's command line, BROKER_CMD_N) and one directory per broker
// (brokerN/data, brokerN/broker.log). `cluster restart` starts a broker
// of it again with the command line up.sh used, and records the new
// process where down.sh looks (brokerN/broker.pid and BROKER_PID_N), so
// `make cluster-down` stops it too.

func init() {
	addCommand("cluster", clusterRestartCommand)
}

func clusterRestartCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restart N [--dir DIR]",
		Short: "start broker N of the local cluster (make cluster) again",
		Long: "Starts broker N of the local cluster of deployments/local/up.sh (make cluster)\n" +
			"with the command line up.sh used (BROKER_CMD_N in DIR/state); a running broker N\n" +
			"is stopped first (SIGTERM, SIGKILL after --grace). Its output goes on into\n" +
			"DIR/brokerN/broker.log; its new process ID into DIR/brokerN/broker.pid and the\n" +
			"state file, where make cluster-down finds it.",
		Args:        exactArgs(1),
		Annotations: noClient,
	}
	f := cmd.Flags()
	dir := f.String("dir", cmp.Or(os.Getenv("CLUSTER_DIR"), ".cluster"), "the cluster's directory, up.sh's --dir (from $CLUSTER_DIR)")
	grace := f.Duration("grace", 30*time.Second, "how long a running broker may take to stop before SIGKILL")
	wait := f.Duration("wait", 30*time.Second, "how long to wait for the restarted broker to listen")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := strconv.Atoi(args[0])
		if err != nil || id < 1 {
			return usageError("broker %q is not a broker ID (1, 2, ...)", args[0])
		}
		return clusterRestart(e, *dir, id, *grace, *wait)
	}
	return cmd
}

func clusterRestart(e *env, dir string, id int, grace, wait time.Duration) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	statePath := filepath.Join(dir, "state")
	state, err := readClusterState(statePath)
	if err != nil {
		return err
	}
	key := strconv.Itoa(id)
	command := strings.Trim(state["BROKER_CMD_"+key], `"`)
	port := state["BROKER_PORT_"+key]
	if command == "" || port == "" {
		return fmt.Errorf("%s has no broker %d (the cluster has %s)", statePath, id, cmp.Or(state["BROKERS"], "none"))
	}
	brokerDir := filepath.Join(dir, "broker"+key)
	data := filepath.Join(brokerDir, "data")
	for _, pid := range processesUsing(data) {
		fmt.Fprintf(e.stdout, "stopping broker %d (pid %d)\n", id, pid)
		if err := stopProcess(pid, grace); err != nil {
			return fmt.Errorf("stop broker %d (pid %d): %w", id, pid, err)
		}
	}

	logFile, err := os.OpenFile(filepath.Join(brokerDir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// BROKER_CMD_N is a shell command line, as a user would paste it;
	// exec makes the broker the shell's process, so the ID recorded is
	// the broker's. Its own session keeps it running after this command
	// and the terminal are gone, as up.sh's background brokers do.
	broker := exec.Command("/bin/bash", "-c", "exec "+command)
	broker.Dir = dir
	broker.Stdout, broker.Stderr = logFile, logFile
	broker.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := broker.Start(); err != nil {
		return fmt.Errorf("start broker %d: %w", id, err)
	}
	pid := broker.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- broker.Wait() }()
	if err := durable.WriteFile(filepath.Join(brokerDir, "broker.pid"), []byte(strconv.Itoa(pid)+"\n")); err != nil {
		return err
	}
	if err := setClusterState(statePath, "BROKER_PID_"+key, strconv.Itoa(pid)); err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", port)
	deadline := time.Now().Add(wait)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("broker %d exited at start (%v); see %s", id, err, logFile.Name())
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("broker %d (pid %d) is not listening on %s after %v; see %s", id, pid, addr, wait, logFile.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(e.stdout, "broker %d restarted (pid %d), listening on %s; log: %s\n", id, pid, addr, logFile.Name())
	return nil
}

// readClusterState reads up.sh's state file: KEY=VALUE lines.
func readClusterState(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no local cluster at %s (start one with make cluster, or give its directory with --dir)", filepath.Dir(path))
	}
	if err != nil {
		return nil, err
	}
	state := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			state[k] = v
		}
	}
	return state, nil
}

// setClusterState replaces (or adds) one KEY=VALUE line of the state file,
// atomically, keeping the other lines as they are.
func setClusterState(path, key, value string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	found := false
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, key+"=") {
			line, found = key+"="+value+"\n", true
		}
		out.WriteString(line)
	}
	if !found {
		fmt.Fprintf(&out, "%s=%s\n", key, value)
	}
	return durable.WriteFile(path, out.Bytes())
}

// processesUsing lists the processes whose command line passes data as
// --data: the brokers of that data directory, however they were started
// (up.sh, this command, or by hand from BROKER_CMD_N). It reads /proc, so
// it finds none where there is no /proc.
func processesUsing(data string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile, or not ours to read
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		for i, arg := range args {
			if arg == "--data="+data || arg == "--data" && i+1 < len(args) && args[i+1] == data {
				pids = append(pids, pid)
				break
			}
		}
	}
	slices.Sort(pids)
	return pids
}

// stopProcess sends SIGTERM and waits up to grace for the process to go,
// then sends SIGKILL and waits for that.
func stopProcess(pid int, grace time.Duration) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return nil // already gone
	}
	gone := func() bool { return p.Signal(syscall.Signal(0)) != nil || zombie(pid) }
	deadline := time.Now().Add(grace)
	for !gone() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if gone() {
		return nil
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return nil
	}
	for range 100 {
		if gone() {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("still running 10s after SIGKILL")
}

// zombie reports whether the process has exited and waits for its parent
// to collect it: it answers signal 0 but is gone.
func zombie(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
