// A server's logs, as the tests read them.
package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// Logs collects a server's JSON log lines (slog's, and the access log's), and reports the address
// that a "listening" line names.
type Logs struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	lines     []map[string]any
	Listening chan string
}

func NewLogs() *Logs { return &Logs{Listening: make(chan string, 1)} }

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadBytes('\n')
		if err != nil { // an incomplete line: keep it for the next write
			l.buf.Reset()
			l.buf.Write(line)
			break
		}
		var entry map[string]any
		if json.Unmarshal(line, &entry) != nil {
			continue
		}
		l.lines = append(l.lines, entry)
		if entry["msg"] == "listening" {
			l.Listening <- fmt.Sprint(entry["addr"])
		}
	}
	return len(p), nil
}

// Entries returns the log lines whose fields include every key and value of match (every line,
// for a nil match).
func (l *Logs) Entries(match map[string]any) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, e := range l.lines {
		ok := true
		for k, v := range match {
			if e[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, e)
		}
	}
	return out
}

func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, e := range l.lines {
		line, _ := json.Marshal(e)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}
