package webhooks

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usersd/store"
	"usersd/store/sqlstore"
)

// countedLog is a real SQLite store's change log that counts its reads.
type countedLog struct {
	store.ChangeLog
	reads atomic.Int32
}

func (c *countedLog) UserEvents(ctx context.Context, after int64, limit int) (store.UserEvents, error) {
	c.reads.Add(1)
	return c.ChangeLog.UserEvents(ctx, after, limit)
}

func openLog(t *testing.T) (*sqlstore.Store, *countedLog) {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, &countedLog{ChangeLog: st}
}

func logChange(t *testing.T, st *sqlstore.Store) {
	t.Helper()
	if _, err := st.CreateUser(context.Background(), store.NewUser{Name: "Changed User"}, nil); err != nil {
		t.Fatal(err)
	}
}

func readAfter(t *testing.T, reads *sharedReads, after int64) store.UserEvents {
	t.Helper()
	page, err := reads.read(context.Background(), after)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// TestCaughtUpDeliverersShareOneRead: deliverers woken together at one position get the same page
// from one read of the log, not one each.
func TestCaughtUpDeliverersShareOneRead(t *testing.T) {
	st, log := openLog(t)
	for range 3 {
		logChange(t, st)
	}
	reads := newSharedReads(t.Context(), log)
	// The clock stands still: a page never ages, however long a loaded machine holds a deliverer
	// back, so any read past the first is one that was not shared.
	stopped := time.Now()
	reads.now = func() time.Time { return stopped }
	const deliverers = 50
	var wg sync.WaitGroup
	start := make(chan struct{})
	pages := make([]store.UserEvents, deliverers)
	for i := range deliverers {
		wg.Go(func() {
			<-start
			pages[i] = readAfter(t, reads, 0)
		})
	}
	close(start)
	wg.Wait()
	for i, page := range pages {
		if len(page.Events) != 3 || page.Latest != 3 {
			t.Fatalf("deliverer %d read %d changes, newest %d; want 3, newest 3", i, len(page.Events), page.Latest)
		}
	}
	if n := log.reads.Load(); n != 1 {
		t.Errorf("%d deliverers at one position read the log %d times; want them to share a read", deliverers, n)
	}
}

// TestANoticeIsNeverHiddenByASharedPage: after a notice starts a new round, a read sees the change
// it announced, however recently the same page was read.
func TestANoticeIsNeverHiddenByASharedPage(t *testing.T) {
	st, log := openLog(t)
	logChange(t, st)
	reads := newSharedReads(t.Context(), log)
	if page := readAfter(t, reads, 0); len(page.Events) != 1 {
		t.Fatalf("first read: %d changes, want 1", len(page.Events))
	}
	logChange(t, st)
	reads.newRound()
	if page := readAfter(t, reads, 0); len(page.Events) != 2 || page.Latest != 2 {
		t.Fatalf("read after the notice: %d changes, newest %d; want 2, newest 2", len(page.Events), page.Latest)
	}
}

// TestAPollReadsAgainOnceThePageIsOld: a change whose notice was lost is read by the next poll,
// since a page serves others only for sharedPageFor.
func TestAPollReadsAgainOnceThePageIsOld(t *testing.T) {
	st, log := openLog(t)
	logChange(t, st)
	reads := newSharedReads(t.Context(), log)
	readAfter(t, reads, 0)
	logChange(t, st) // no new round: its notice was lost
	time.Sleep(sharedPageFor)
	if page := readAfter(t, reads, 0); len(page.Events) != 2 {
		t.Fatalf("read after the page grew old: %d changes, want 2", len(page.Events))
	}
	if pollEvery <= 2*sharedPageFor {
		t.Errorf("pollEvery %v is not well above sharedPageFor %v: a poll could read a page as old as the poll period", pollEvery, sharedPageFor)
	}
}

// TestOnlyRecentPagesAreKept: without notices (another replica's can be lost), pages read at
// other positions do not pile up: a page no read may take any more is let go.
func TestOnlyRecentPagesAreKept(t *testing.T) {
	st, log := openLog(t)
	for range 3 {
		logChange(t, st)
	}
	reads := newSharedReads(t.Context(), log)
	readAfter(t, reads, 0)
	readAfter(t, reads, 1)
	time.Sleep(sharedPageFor)
	readAfter(t, reads, 2)
	reads.mu.Lock()
	defer reads.mu.Unlock()
	if len(reads.pages) != 1 {
		t.Fatalf("%d pages kept after the others grew old, want 1", len(reads.pages))
	}
}
