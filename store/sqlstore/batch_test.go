package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

// TestABatchKeepsEachWritesOwnOutcome holds the database's write lock from outside the store while
// one write waits for it, queues a mix of writes that succeed and writes that fail (a stale
// version, a missing user, a missing post author, a key in progress, the same new key twice, a
// create whose key was lost, a create whose kept answer panics), and then lets go: the queued writes commit as one batch, each gets
// its own outcome, and what the database holds afterwards is exactly the successes, each once, with
// exact totals and one change in the log for each.
func TestABatchKeepsEachWritesOwnOutcome(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "users.db")
		testABatchKeepsEachWritesOwnOutcome(t, open(t, path), func(t *testing.T, _ store.User) func() {
			return holdSQLiteWriteLock(t, path)
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := storetest.PostgresSchema(t)
		testABatchKeepsEachWritesOwnOutcome(t, open(t, dsn), func(t *testing.T, u store.User) func() {
			return holdPostgresRowLock(t, dsn, u.ID)
		})
	})
}

// holdSQLiteWriteLock takes the file's write lock on a connection of its own and returns what
// lets it go.
func holdSQLiteWriteLock(t *testing.T, path string) func() {
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
			t.Error(err)
		}
		conn.Close()
		db.Close()
	}
}

// holdPostgresRowLock locks user id's row on a connection of its own and returns what lets it go.
func holdPostgresRowLock(t *testing.T, dsn string, id int32) func() {
	tx, err := storetest.OpenPostgres(t, dsn).BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(t.Context(), `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := tx.Rollback(); err != nil {
			t.Error(err)
		}
	}
}

func testABatchKeepsEachWritesOwnOutcome(t *testing.T, s *sqlstore.Store, hold func(*testing.T, store.User) func()) {
	defer s.Close()
	ctx := t.Context()
	mustCreate := func(name, role string) store.User {
		t.Helper()
		u, err := s.CreateUser(ctx, store.NewUser{Name: name, Role: role}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	blocked, renamed, stale, doomed := mustCreate("blocked", "viewer"), mustCreate("renamed", "viewer"),
		mustCreate("stale", "viewer"), mustCreate("doomed", "admin")
	inProgress := store.RequestKey{Caller: "c", Key: "in progress"}
	if _, _, err := s.BeginRequest(ctx, inProgress, []byte("h")); err != nil {
		t.Fatal(err)
	}
	lostKey := store.RequestKey{Caller: "c", Key: "lost"}
	lost, _, err := s.BeginRequest(ctx, lostKey, []byte("h"))
	if err != nil {
		t.Fatal(err)
	}
	lost.Token = "another request's" // as if the lease ran out and another request took the key over
	panics, _, err := s.BeginRequest(ctx, store.RequestKey{Caller: "c", Key: "panics"}, []byte("h"))
	if err != nil {
		t.Fatal(err)
	}
	events := readAllEvents(t, s)
	before := s.WriteBatches()

	// Writes that wait for the lock take every connection the store commits on (one on SQLite, a
	// few on PostgreSQL), one each, until one finds them all taken and queues; the rest queue
	// behind it.
	release := hold(t, blocked)
	var blockers []chan error
	for {
		done := make(chan error, 1)
		blockers = append(blockers, done)
		name := fmt.Sprint("blocked, then renamed ", len(blockers))
		go func() {
			_, err := s.UpdateUser(ctx, blocked.ID, store.UserChanges{Name: &name}, nil)
			done <- err
		}()
		waitFor(t, "the write to be taken or queued", func() bool {
			b := s.WriteBatches()
			return b.Committing+b.Waiting == len(blockers)
		})
		if s.WriteBatches().Waiting == 1 {
			break
		}
	}
	alone := len(blockers) - 1 // each in a commit of its own; the last goes into the batch

	newName, newRole := "renamed again", "editor"
	keepAnswer := func(r store.Reservation) *store.Completion[store.User] {
		return &store.Completion[store.User]{Reservation: r, Answer: func(u store.User) (store.Answer, error) {
			return store.Answer{Body: []byte(u.Name)}, nil
		}}
	}
	writes := []struct {
		name string
		do   func() error
		want error // nil: succeeds
	}{
		{"a create", func() error {
			_, err := s.CreateUser(ctx, store.NewUser{Name: "created", Role: "viewer"}, nil)
			return err
		}, nil},
		{"an update", func() error {
			_, err := s.UpdateUser(ctx, renamed.ID, store.UserChanges{Name: &newName, Role: &newRole}, store.IfVersion{1})
			return err
		}, nil},
		{"an update at a stale version", func() error {
			_, err := s.UpdateUser(ctx, stale.ID, store.UserChanges{Name: &newName}, store.IfVersion{7})
			return err
		}, store.ErrVersionMismatch},
		{"an update of a missing user", func() error {
			_, err := s.UpdateUser(ctx, 99_999, store.UserChanges{Name: &newName}, nil)
			return err
		}, store.ErrNotFound},
		{"a delete at a stale version", func() error { return s.DeleteUser(ctx, stale.ID, store.IfVersion{3}) }, store.ErrVersionMismatch},
		{"a delete", func() error { return s.DeleteUser(ctx, doomed.ID, nil) }, nil},
		{"a delete of a missing user", func() error { return s.DeleteUser(ctx, 99_999, nil) }, store.ErrNotFound},
		{"a post", func() error { _, err := s.CreatePost(ctx, renamed.ID, store.NewPost{Title: "kept"}, nil); return err }, nil},
		{"a post of a missing user", func() error {
			_, err := s.CreatePost(ctx, 99_999, store.NewPost{Title: "orphan"}, nil)
			return err
		}, store.ErrNotFound},
		{"a key in progress", func() error { _, _, err := s.BeginRequest(ctx, inProgress, []byte("h")); return err }, store.ErrRequestInProgress},
		{"a key used with another request", func() error { _, _, err := s.BeginRequest(ctx, inProgress, []byte("other")); return err }, store.ErrRequestMismatch},
		{"a create whose kept answer panics", func() error {
			panicking := &store.Completion[store.User]{Reservation: panics, Answer: func(store.User) (store.Answer, error) {
				panic("the answer cannot be built")
			}}
			_, err := s.CreateUser(ctx, store.NewUser{Name: "never kept either", Role: "ghost"}, panicking)
			return err
		}, errAny},
		{"a create whose key another request took over", func() error {
			_, err := s.CreateUser(ctx, store.NewUser{Name: "never kept", Role: "ghost"}, keepAnswer(lost))
			return err
		}, store.ErrRequestInProgress},
	}
	// Two requests with the same new key: exactly one takes it, in the same batch.
	twin := store.RequestKey{Caller: "c", Key: "twin"}
	var twinsMu sync.Mutex
	var twinOutcomes []error
	for range 2 {
		writes = append(writes, struct {
			name string
			do   func() error
			want error
		}{"a twin key", func() error {
			_, _, err := s.BeginRequest(ctx, twin, []byte("h"))
			twinsMu.Lock()
			twinOutcomes = append(twinOutcomes, err)
			twinsMu.Unlock()
			return nil
		}, nil})
	}

	outcomes := make([]error, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(func() { outcomes[i] = w.do() })
	}
	waitFor(t, "every write to queue", func() bool { return s.WriteBatches().Waiting == len(writes)+1 })
	release()
	for _, done := range blockers {
		if err := <-done; err != nil {
			t.Fatalf("a write that waited for the lock: %v", err)
		}
	}
	wg.Wait()

	for i, w := range writes {
		if w.want == errAny && outcomes[i] != nil {
			continue
		}
		if w.want == nil && outcomes[i] != nil || w.want != nil && !errors.Is(outcomes[i], w.want) {
			t.Errorf("%s: %v, want %v", w.name, outcomes[i], w.want)
		}
	}
	slices.SortFunc(twinOutcomes, func(a, b error) int { return boolInt(a != nil) - boolInt(b != nil) })
	if len(twinOutcomes) != 2 || twinOutcomes[0] != nil || !errors.Is(twinOutcomes[1], store.ErrRequestInProgress) {
		t.Errorf("two requests with one key in one batch: %v, want one to take it and one in progress", twinOutcomes)
	}
	after := s.WriteBatches()
	if commits, carried := after.Commits-before.Commits, after.Writes-before.Writes; commits != uint64(alone+1) || carried != uint64(alone+len(writes)+1) {
		t.Errorf("%d commits carried %d writes; want %d of one write each, and one batch of the other %d", commits, carried, alone, len(writes)+1)
	}

	// The database holds the successes, each once, and nothing of the failures.
	page, err := s.ListUsers(ctx, store.UserQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range page.Items {
		name, _, _ := strings.Cut(u.Name, ", then renamed") // the blockers' writes commit in any order
		got = append(got, fmt.Sprintf("%s/%s/v%d", name, u.Role, u.Version))
	}
	want := []string{fmt.Sprintf("blocked/viewer/v%d", 1+len(blockers)), "renamed again/editor/v2", "stale/viewer/v1", "created/viewer/v1"}
	if !slices.Equal(got, want) || page.Total != int64(len(want)) {
		t.Errorf("users after the batch: %q (total %d), want %q", got, page.Total, want)
	}
	for role, n := range map[string]int64{"viewer": 3, "editor": 1, "admin": 0, "ghost": 0} {
		if p, err := s.ListUsers(ctx, store.UserQuery{Role: role, Limit: 1}); err != nil || p.Total != n {
			t.Errorf("total of role %q: %d, %v; want %d", role, p.Total, err, n)
		}
	}
	posts, err := s.ListPosts(ctx, renamed.ID, store.PostQuery{Limit: 10})
	if err != nil || posts.Total != 1 {
		t.Errorf("posts of %d: %+v, %v; want the one kept", renamed.ID, posts, err)
	}
	var kinds []string
	for _, e := range readAllEvents(t, s)[len(events):] {
		kinds = append(kinds, e.Kind.String())
	}
	slices.Sort(kinds)
	want = nil
	for range len(blockers) + 1 {
		want = append(want, store.EventUpdated.String())
	}
	want = append(want, store.EventCreated.String(), store.EventDeleted.String())
	slices.Sort(want)
	if !slices.Equal(kinds, want) {
		t.Errorf("changes logged by the batch: %v, want %v", kinds, want)
	}
}

// errAny is the outcome of a write that must fail, whatever its error says.
var errAny = errors.New("any error")

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readAllEvents reads the whole change log.
func readAllEvents(t *testing.T, s store.Store) []store.UserEvent {
	t.Helper()
	page, err := s.UserEvents(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return page.Events
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) { // a hang detector
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
	}
}
