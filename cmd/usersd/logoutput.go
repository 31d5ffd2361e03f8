// The log's way out: every line goes to one writer, in the order it was logged, and the access log's
// lines are batched so that a busy server does not spend a system call on each request's line.
package main

import (
	"io"
	"sync"
	"time"
)

const (
	// accessLogBatchBytes is how much of the access log is held before it is written.
	accessLogBatchBytes = 32 << 10
	// accessLogDelay is the longest an access log line waits to be written: what a crash (SIGKILL,
	// power loss) can lose of the access log. A clean stop writes everything.
	accessLogDelay = 100 * time.Millisecond
)

// logOutput writes whole log lines to w. A line through Now is written at once, after any batched
// lines before it; a line through Later joins a batch that is written when it holds
// accessLogBatchBytes or accessLogDelay after its first line, whichever comes first.
type logOutput struct {
	mu        sync.Mutex
	w         io.Writer
	pending   []byte
	scheduled bool // a timer will flush pending
}

func newLogOutput(w io.Writer) *logOutput { return &logOutput{w: w} }

// Now is the writer of lines that must not wait: warnings, errors, the server's own events.
func (o *logOutput) Now() io.Writer { return writerFunc(o.writeNow) }

// Later is the writer of the access log.
func (o *logOutput) Later() io.Writer { return writerFunc(o.writeLater) }

// Flush writes every batched line.
func (o *logOutput) Flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.flushLocked()
}

func (o *logOutput) writeNow(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = append(o.pending, p...)
	return len(p), o.flushLocked()
}

func (o *logOutput) writeLater(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = append(o.pending, p...)
	if len(o.pending) >= accessLogBatchBytes {
		return len(p), o.flushLocked()
	}
	if !o.scheduled {
		o.scheduled = true
		time.AfterFunc(accessLogDelay, func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.scheduled = false
			o.flushLocked() // an error here has no caller to go to; the next line's write reports it
		})
	}
	return len(p), nil
}

// flushLocked writes what is pending, with o.mu held. What the writer did not take is dropped, so a
// broken log cannot grow the buffer without bound.
func (o *logOutput) flushLocked() error {
	if len(o.pending) == 0 {
		return nil
	}
	_, err := o.w.Write(o.pending)
	if cap(o.pending) > 4*accessLogBatchBytes { // do not keep a burst's buffer for ever
		o.pending = nil
	} else {
		o.pending = o.pending[:0]
	}
	return err
}

// writerFunc makes an io.Writer of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
