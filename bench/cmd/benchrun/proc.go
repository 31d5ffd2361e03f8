package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"usersd/bench/internal/procstat"
)

// server is one server process that the harness started, pinned to CPU 0.
type server struct {
	cmd  *exec.Cmd
	log  string
	addr string
	done chan struct{} // closed when the process has exited
}

// listenAddr finds the address in the server's JSON line {"msg":"listening","addr":...}, which
// usersd and the baselines alike write first or nearly so.
func listenAddr(log string) string {
	for line := range strings.Lines(log) {
		var entry struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "listening" && entry.Addr != "" {
			return entry.Addr
		}
	}
	return ""
}

// startServer starts bin pinned to CPU 0 (taskset execs it, so the pid is the server's own), with
// its output in logPath, and waits until it says which address it listens on.
func startServer(bin string, args, env []string, logPath string) (*server, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command("taskset", append([]string{"-c", "0", bin}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited before listening: %s", bin, procstat.Tail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
		if s.addr = listenAddr(head(logPath)); s.addr != "" {
			return s, nil
		}
	}
	s.stop(syscall.SIGKILL)
	return nil, fmt.Errorf("%s did not say where it listens within 30s: %s", bin, procstat.Tail(logPath))
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop sends sig and waits for the process to exit; a process that has not exited 20 seconds after
// SIGTERM is killed.
func (s *server) stop(sig syscall.Signal) {
	s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// head is the start of a log: the line about the listener comes first or nearly so.
func head(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 4096)
	n, _ := f.Read(buf)
	return string(buf[:n])
}
