package main

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log destination that tests can read while lines are being written.
type lockedBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

func (b *lockedBuffer) read() (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String(), b.writes
}

func TestLogOutputKeepsTheOrderOfLines(t *testing.T) {
	var dst lockedBuffer
	out := newLogOutput(&dst)
	out.Later().Write([]byte("access 1\n"))
	out.Later().Write([]byte("access 2\n"))
	if got, _ := dst.read(); got != "" {
		t.Fatalf("access lines were written at once: %q", got)
	}
	out.Now().Write([]byte("error\n"))
	got, writes := dst.read()
	if got != "access 1\naccess 2\nerror\n" || writes != 1 {
		t.Fatalf("got %q in %d writes, want the access lines, then the error, in one write", got, writes)
	}
}

// TestLogOutputWritesABatchWithinTheDelay: a batch that nothing else fills or flushes goes out on
// its own once the delay has passed, never before. The wait for it is a hang detector (a batch left
// for the next write would never go out here), not a bound on the timer's punctuality, which a
// busy machine can spoil.
func TestLogOutputWritesABatchWithinTheDelay(t *testing.T) {
	var dst lockedBuffer
	out := newLogOutput(&dst)
	start := time.Now()
	out.Later().Write([]byte("access\n"))
	for {
		if got, _ := dst.read(); got == "access\n" {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the access line was not written within 30s: the batch waits for another write")
		}
		time.Sleep(accessLogDelay / 10)
	}
	if waited := time.Since(start); waited < accessLogDelay {
		t.Errorf("the batch went out after %s, before the %s delay: a line a write", waited, accessLogDelay)
	}
}

func TestLogOutputWritesAFullBatchAtOnce(t *testing.T) {
	var dst lockedBuffer
	out := newLogOutput(&dst)
	line := strings.Repeat("x", 1023) + "\n"
	for range accessLogBatchBytes / len(line) {
		out.Later().Write([]byte(line))
	}
	got, writes := dst.read()
	if len(got) != accessLogBatchBytes || writes != 1 {
		t.Fatalf("a full batch: %d bytes in %d writes, want %d in 1", len(got), writes, accessLogBatchBytes)
	}
}

func TestLogOutputFlushWritesWhatIsBatched(t *testing.T) {
	var dst lockedBuffer
	out := newLogOutput(&dst)
	out.Later().Write([]byte("last access\n"))
	if err := out.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, _ := dst.read(); got != "last access\n" {
		t.Fatalf("after Flush: %q", got)
	}
}

type failingWriter struct{}

func (failingWriter) Write(p []byte) (int, error) { return 0, errors.New("disk full") }

// TestLogOutputReportsAndDropsWhatCannotBeWritten: a broken destination is reported to the next
// writer of a line, and its lines do not pile up in memory.
func TestLogOutputReportsAndDropsWhatCannotBeWritten(t *testing.T) {
	out := newLogOutput(failingWriter{})
	if _, err := out.Now().Write([]byte("error\n")); err == nil {
		t.Fatal("a failed write was not reported")
	}
	if len(out.pending) != 0 {
		t.Fatalf("%d bytes kept after a failed write", len(out.pending))
	}
}
