package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"usersd/bench/internal/procstat"
)

// server is one usersd process that watchload started, or one it was given (-addr, -pid).
type server struct {
	cmd  *exec.Cmd // nil for a server watchload did not start
	pid  int
	addr string
	log  string
	done chan struct{} // closed when the process has exited
}

// startServer starts bin, pinned to cpus with taskset when cpus is set (taskset execs it, so the
// pid is the server's own), with its output in logPath, and waits until it says where it listens:
// usersd's first JSON line {"msg":"listening","addr":...}.
func startServer(bin, cpus string, args []string, logPath string) (*server, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	var cmd *exec.Cmd
	if cpus != "" {
		cmd = exec.Command("taskset", append([]string{"-c", cpus, bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, pid: cmd.Process.Pid, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited before listening: %s", bin, procstat.Tail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
		if s.addr = listenAddr(logPath); s.addr != "" {
			return s, nil
		}
	}
	s.stop()
	return nil, fmt.Errorf("%s did not say where it listens within 30s: %s", bin, procstat.Tail(logPath))
}

// stop sends SIGTERM and waits for the process to exit, killing it after 20 seconds; it returns how
// the process ended. A server watchload did not start is left alone.
func (s *server) stop() string {
	if s.cmd == nil {
		return "left running (not started here)"
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		return "killed: did not exit within 20s of SIGTERM"
	}
	return s.cmd.ProcessState.String()
}

func listenAddr(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for i := 0; i < 50 && lines.Scan(); i++ {
		var entry struct{ Msg, Addr string }
		if json.Unmarshal(lines.Bytes(), &entry) == nil && entry.Msg == "listening" && entry.Addr != "" {
			return entry.Addr
		}
	}
	return ""
}

// threads is the number of threads of process pid.
func threads(pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0
	}
	return len(entries)
}
