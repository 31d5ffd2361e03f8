package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usersd/internal/apitest"
)

// TestABackupUnderWritesRestoresEveryAcknowledgedUser backs the database up with `usersd backup`
// while four clients create users as fast as they can, then restores the copy as docs/BACKUPS.md#restoring-sqlite says
// and serves it: every user whose create was acknowledged before the backup began is there, and
// the copy is consistent (its count of users is the users it lists). A plain copy of the file
// kept 4 of 30 users: the rest were in the write-ahead log.
func TestABackupUnderWritesRestoresEveryAcknowledgedUser(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "data", "users.db")
	_, s, _ := startProcess(t, dbPath)

	var mu sync.Mutex
	type ack struct {
		id int
		at time.Time
	}
	var acks []ack
	var stop atomic.Bool
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Go(func() {
			for n := 0; !stop.Load(); n++ {
				id, err := createUser(s.BaseURL, fmt.Sprintf("writer %d user %d", w, n))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acks = append(acks, ack{id, time.Now()})
				mu.Unlock()
			}
		})
	}
	// The backup starts once the writes are well under way: after 100 acknowledged creates, however
	// long a busy machine takes to make them (a fixed second gave 82 beside other work).
	acknowledged := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acks)
	}
	for deadline := time.Now().Add(time.Minute); acknowledged() < 100 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	backup := filepath.Join(dir, "backup.db")
	began := time.Now()
	stdout, stderr, code := runBinary(t, nil, "backup", "-db", dbPath, backup)
	if code != 0 || !strings.HasPrefix(stdout, "backed up ") {
		t.Fatalf("backup: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	writers.Wait()

	// docs/BACKUPS.md's restore: the copy becomes the database file of a service that is not running,
	// with no write-ahead log of another file beside it.
	restored := filepath.Join(dir, "restored", "users.db")
	os.MkdirAll(filepath.Dir(restored), 0o750)
	if err := os.Rename(backup, restored); err != nil {
		t.Fatal(err)
	}
	_, r, _ := startProcess(t, restored)
	present := r.ListIDs(t)
	var before, after int
	for _, a := range acks {
		switch {
		case a.at.Before(began):
			before++
			if _, found := slices.BinarySearch(present, a.id); !found {
				t.Errorf("user %d, acknowledged %v before the backup began, is not in it", a.id, began.Sub(a.at))
			}
		default:
			after++
		}
	}
	list := r.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: "/users?limit=1"})
	if total, _ := strconv.Atoi(list.Header.Get("X-Total-Count")); total != len(present) {
		t.Errorf("the restored copy counts %d users and lists %d", total, len(present))
	}
	if before < 100 {
		t.Fatalf("only %d creates were acknowledged before the backup: the writes were not under way", before)
	}
	t.Logf("%d users acknowledged before the backup, %d after; the copy holds %d", before, after, len(present))
}

// createUser creates a user through REST with the test key and returns its id.
func createUser(base, name string) (int, error) {
	status, answer, err := apitest.PostJSON(base+"/users", fmt.Sprintf(`{"name":%q}`, name))
	if err != nil {
		return 0, err
	}
	if status != http.StatusCreated {
		return 0, fmt.Errorf("create: %d %s", status, answer)
	}
	var u struct{ ID int }
	if err := json.Unmarshal(answer, &u); err != nil {
		return 0, err
	}
	return u.ID, nil
}
