// Package procstat reads what the benchmark programs measure of processes and CPUs from Linux's
// /proc: CPU time, resident memory, and how busy each CPU was.
package procstat

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// CPUTicks is the CPU time (user + system, in clock ticks) that process pid has used, all its
// threads together: fields 14 and 15 of /proc/PID/stat.
func CPUTicks(pid int) (int64, error) {
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

// TicksSince is the CPU the processes in after spent since before (both by pid); a process that
// started in between counts from zero.
func TicksSince(before, after map[int]int64) int64 {
	var sum int64
	for pid, t := range after {
		sum += t - before[pid]
	}
	return sum
}

// Memory is a process's resident set now (VmRSS) and at its peak so far (VmHWM), in KiB.
type Memory struct{ RSS, HWM int64 }

// ReadMemory reads Memory from /proc/PID/status.
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	var m Memory
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		for prefix, p := range map[string]*int64{"VmRSS:": &m.RSS, "VmHWM:": &m.HWM} {
			if rest, ok := strings.CutPrefix(lines.Text(), prefix); ok {
				if *p, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64); err != nil {
					return Memory{}, err
				}
			}
		}
	}
	if m.RSS == 0 || m.HWM == 0 {
		return Memory{}, fmt.Errorf("no VmRSS or VmHWM in /proc/%d/status", pid)
	}
	return m, nil
}

// CPUBusy is how many clock ticks each CPU ("cpu0", "cpu1", ...) has spent on anything but idle
// and I/O wait since boot (/proc/stat), so that the work of other processes on the machine shows.
func CPUBusy() (map[string]int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	busy := map[string]int64{}
	for line := range strings.Lines(string(b)) {
		fields := strings.Fields(line)
		if len(fields) < 9 || !strings.HasPrefix(fields[0], "cpu") || fields[0] == "cpu" {
			continue
		}
		var sum int64
		// user nice system idle iowait irq softirq steal; guest time is already counted in user.
		for i, f := range fields[1:9] {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return nil, err
			}
			if i != 3 && i != 4 {
				sum += v
			}
		}
		busy[fields[0]] = sum
	}
	return busy, nil
}

// ClockTicks is USER_HZ, the unit of /proc's CPU times (getconf CLK_TCK).
func ClockTicks() (int64, error) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 0, fmt.Errorf("getconf CLK_TCK: %w", err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}

// Tail is the last 2,000 bytes of the file at path, for an error message; "" if it cannot be read.
func Tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Threads is the number of threads of process pid, or 0 if it cannot be read.
func Threads(pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0
	}
	return len(entries)
}
