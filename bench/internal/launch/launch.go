// Package launch starts the server that a benchmark measures, and stops it: benchrun (usersd and
// its baselines) and watchload start theirs the same way.
package launch

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

// Server is a server process that a harness started.
type Server struct {
	// Addr is where it listens, as its JSON line {"msg":"listening","addr":...} says.
	Addr string
	// Log is the file that holds its output.
	Log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// Start starts bin with args, and env added to the harness's own environment, pinned to cpus with
// taskset unless cpus is empty (taskset execs it, so the pid is the server's own), with its output
// in logPath. It waits up to 30 s for the line that says where the server listens.
func Start(bin, cpus string, args, env []string, logPath string) (*Server, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(bin, args...)
	if cpus != "" {
		cmd = exec.Command("taskset", append([]string{"-c", cpus, bin}, args...)...)
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited before listening: %s", bin, procstat.Tail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
		if s.Addr = listenAddr(logPath); s.Addr != "" {
			return s, nil
		}
	}
	s.Stop(syscall.SIGKILL)
	return nil, fmt.Errorf("%s did not say where it listens within 30s: %s", bin, procstat.Tail(logPath))
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop sends sig and waits for the process to exit, killing it if it has not 20 s later; it says
// how the process ended.
func (s *Server) Stop(sig syscall.Signal) string {
	s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		return fmt.Sprintf("killed: did not exit within 20s of %v", sig)
	}
	return s.cmd.ProcessState.String()
}

// listenAddr finds the address in the line {"msg":"listening","addr":...} among the first lines
// of the log, where usersd and the baselines alike write it.
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
