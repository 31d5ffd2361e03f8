package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
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
			return nil, fmt.Errorf("%s exited before listening: %s", bin, tail(logPath))
		case <-time.After(20 * time.Millisecond):
		}
		if s.addr = listenAddr(head(logPath)); s.addr != "" {
			return s, nil
		}
	}
	s.stop(syscall.SIGKILL)
	return nil, fmt.Errorf("%s did not say where it listens within 30s: %s", bin, tail(logPath))
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

// tail is the end of a log, for error messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// cpuTicks is the CPU time (user + system, in clock ticks) that process pid has used, all its
// threads together: fields 14 and 15 of /proc/PID/stat.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	_, rest, ok := strings.Cut(string(b), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		return 0, fmt.Errorf("cannot read /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return utime + stime, nil
}

// peakRSS is the process's peak resident set size so far, in KiB (VmHWM of /proc/PID/status).
func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmHWM in /proc/PID/status")
}

// cpuBusy is how many clock ticks CPU n has spent on anything but idle and I/O wait since boot
// (/proc/stat), so that time taken on the server's CPU by other processes shows as noise.
func cpuBusy(n int) (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	prefix := "cpu" + strconv.Itoa(n) + " "
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		var busy int64
		for i, f := range strings.Fields(rest) {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return 0, err
			}
			// user nice system idle iowait irq softirq steal guest guest_nice; guest time is
			// already counted in user.
			if i != 3 && i != 4 && i < 8 {
				busy += v
			}
		}
		return busy, nil
	}
	return 0, fmt.Errorf("no %q line in /proc/stat", strings.TrimSpace(prefix))
}

// clockTicks is USER_HZ, the unit of /proc's CPU times (getconf CLK_TCK).
func clockTicks() (int64, error) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 0, fmt.Errorf("getconf CLK_TCK: %w", err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}
