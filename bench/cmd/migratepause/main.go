// Command migratepause measures how long a schema migration holds up writes: a replica of the
// previous release (-old) serves a PostgreSQL database and takes a steady stream of creates from
// -writers clients, while a replica of the new release (-new) starts on the same database and
// migrates it. It reports how long the new replica took to start (the migration), the longest time
// any create waited during it (the pause the migration caused, as the writers saw it), and every
// answer that was not a 201.
//
//	migratepause -old OLD_BIN -new NEW_BIN -db postgres://.../copy_of_a_seeded_database
//
// The database is changed: give it a copy (CREATE DATABASE x TEMPLATE seeded).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"usersd/bench/internal/launch"
)

const apiKey = "bench-key-0123456789"

func main() {
	oldBin := flag.String("old", "", "usersd of the previous release, which serves the writes")
	newBin := flag.String("new", "", "usersd of the new release, whose start migrates the database")
	db := flag.String("db", "", "PostgreSQL database of the previous release's schema (it is migrated)")
	writers := flag.Int("writers", 8, "concurrent clients creating users on the old replica")
	settle := flag.Duration("settle", 5*time.Second, "creates before the new replica starts, and after it serves")
	identity := flag.Bool("identity", true, "give each create a unique user name (false for a release before the identity fields)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("migratepause: ")
	if *oldBin == "" || *newBin == "" || *db == "" {
		log.Fatal("-old, -new and -db are needed")
	}
	work, err := os.MkdirTemp("", "usersd-migratepause-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)

	env := []string{"USERS_API_KEYS=" + apiKey}
	old, err := launch.Start(*oldBin, "", []string{"-addr", "127.0.0.1:0", "-db", *db}, env, filepath.Join(work, "old.log"))
	if err != nil {
		log.Fatalf("start the old replica: %v", err)
	}
	defer old.Stop(syscall.SIGTERM)

	load := &writes{url: "http://" + old.Addr + "/users", identity: *identity}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range *writers {
		wg.Go(func() { load.run(ctx, w) })
	}
	time.Sleep(*settle)

	began := time.Now()
	migrated, err := startAndWait(*newBin, *db, env, filepath.Join(work, "new.log"))
	if err != nil {
		stop()
		wg.Wait()
		log.Fatalf("start the new replica: %v", err)
	}
	serving := time.Now()
	time.Sleep(*settle)
	stop()
	wg.Wait()
	migrated.Process.Signal(syscall.SIGTERM)

	during := load.longestWait(began, serving)
	fmt.Printf("new replica serving after %v (the migration)\n", serving.Sub(began).Round(time.Millisecond))
	fmt.Printf("creates: %d answered 201 (%d during the migration); longest wait of a create during it: %v; before it: %v; after it, while work it left to the background runs: %v\n",
		load.count(time.Time{}, time.Now()), load.count(began, serving), during.Round(time.Millisecond),
		load.longestWait(time.Time{}, began).Round(time.Millisecond), load.longestWait(serving, time.Now()).Round(time.Millisecond))
	fmt.Printf("answers other than 201: %v\n", load.failures)
}

// startAndWait starts usersd and waits, as long as a migration takes, for the line that says it
// listens.
func startAndWait(bin, db string, env []string, logPath string) (*exec.Cmd, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-db", db)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(30 * time.Minute); time.Now().Before(deadline); {
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("it exited (%v): %s", err, out)
		case <-time.After(20 * time.Millisecond):
		}
		if listening(logPath) {
			return cmd, nil
		}
	}
	cmd.Process.Kill()
	<-exited
	return nil, fmt.Errorf("it did not serve within 30 minutes")
}

func listening(logPath string) bool {
	f, err := os.Open(logPath)
	if err != nil {
		return false
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		var entry struct{ Msg string }
		if json.Unmarshal(lines.Bytes(), &entry) == nil && entry.Msg == "listening" {
			return true
		}
	}
	return false
}

// writes creates users in a loop and keeps when each create was sent and answered.
type writes struct {
	url      string
	identity bool
	mu       sync.Mutex
	answered []span // of every 201
	failures map[string]int
}

type span struct{ sent, answered time.Time }

func (l *writes) run(ctx context.Context, writer int) {
	client := &http.Client{Timeout: time.Minute}
	for n := 0; ctx.Err() == nil; n++ {
		body := fmt.Sprintf(`{"name":"migration writer %d create %d"}`, writer, n)
		if l.identity {
			body = fmt.Sprintf(`{"name":"migration writer %d create %d","userName":"mw-%d-%d-%d"}`, writer, n, writer, n, time.Now().UnixNano())
		}
		req, _ := http.NewRequest("POST", l.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-api-key", apiKey)
		sent := time.Now()
		res, err := client.Do(req)
		what := "transport"
		if err == nil {
			res.Body.Close()
			what = fmt.Sprint(res.StatusCode)
		}
		l.mu.Lock()
		if what == "201" {
			l.answered = append(l.answered, span{sent, time.Now()})
		} else {
			if l.failures == nil {
				l.failures = map[string]int{}
			}
			l.failures[what]++
		}
		l.mu.Unlock()
	}
}

// longestWait is the longest time a create answered 201 waited, among those that were waiting at
// any moment in [from, to].
func (l *writes) longestWait(from, to time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var waits []time.Duration
	for _, s := range l.answered {
		if s.answered.After(from) && s.sent.Before(to) {
			waits = append(waits, s.answered.Sub(s.sent))
		}
	}
	if len(waits) == 0 {
		return 0
	}
	return slices.Max(waits)
}

// count is how many creates were answered 201 in [from, to].
func (l *writes) count(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.answered {
		if !s.answered.Before(from) && !s.answered.After(to) {
			n++
		}
	}
	return n
}
