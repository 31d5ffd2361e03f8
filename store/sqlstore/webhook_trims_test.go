package sqlstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"usersd/store"
)

// historyRows counts the rows of a subscription's history of attempts.
func historyRows(t *testing.T, st *Store, id int32) int {
	t.Helper()
	var rows int
	if err := st.writer.QueryRowContext(context.Background(), `SELECT count(*) FROM webhook_deliveries WHERE webhook_id = $1`, id).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestTheHistoryOfAttemptsStaysBounded records many attempts of one subscription in one process,
// then a few in the next one, and after each counts the rows of its history: never more than
// recentDeliveries+trimEvery-1, back to recentDeliveries at the first record of the new process
// however few it makes, and WebhookDeliveries answers the newest recentDeliveries throughout.
func TestTheHistoryOfAttemptsStaysBounded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.db")
	st, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := st.CreateWebhook(ctx, store.Webhook{URL: "https://hooks.example.com/usersd", Enabled: true, Secret: "whsec_test"})
	if err != nil {
		t.Fatal(err)
	}
	recorded := 0
	record := func(st *Store, held store.Webhook, n int) store.Webhook {
		t.Helper()
		for range n {
			recorded++
			a := store.WebhookAttempt{Sequence: held.Delivered + 1, Status: int32(recorded), At: time.Now()}
			if held, err = st.RecordWebhookAttempt(ctx, "a", held, a, store.WebhookOutcome{Record: true}); err != nil {
				t.Fatalf("attempt %d: %v", recorded, err)
			}
			if rows := historyRows(t, st, hook.ID); rows > recentDeliveries+trimEvery-1 {
				t.Fatalf("after attempt %d the history holds %d rows, want at most %d", recorded, rows, recentDeliveries+trimEvery-1)
			}
			kept, err := st.WebhookDeliveries(ctx, hook.ID, 1000)
			if want := min(recorded, recentDeliveries); err != nil || len(kept) != want || kept[0].Status != int32(recorded) {
				t.Fatalf("after attempt %d: answered %d attempts (%v), want the newest %d", recorded, len(kept), err, want)
			}
		}
		return held
	}
	lease := func(st *Store) store.Webhook {
		t.Helper()
		leased, err := st.LeaseWebhooks(ctx, "a", time.Minute)
		if err != nil || len(leased) != 1 {
			t.Fatalf("lease: %v, %d held", err, len(leased))
		}
		return leased[0]
	}

	// Trims at the first record and every trimEvery-th after it; the last trim here comes past
	// recentDeliveries, and the records after it stop one short of the next trim.
	record(st, lease(st), 5*trimEvery)
	if rows := historyRows(t, st, hook.ID); rows != recentDeliveries+trimEvery-1 {
		t.Fatalf("the history holds %d rows, want %d", rows, recentDeliveries+trimEvery-1)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	next, err := Open(ctx, path) // a new process: its count starts again
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	record(next, lease(next), 1)
	if rows := historyRows(t, next, hook.ID); rows != recentDeliveries {
		t.Fatalf("after a restart's first record the history holds %d rows, want %d", rows, recentDeliveries)
	}
}

// openWithWebhook opens a store on a new SQLite file holding one subscription, closed at the end of
// the test.
func openWithWebhook(t *testing.T) (*Store, store.Webhook) {
	t.Helper()
	st, err := Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hook, err := st.CreateWebhook(context.Background(), store.Webhook{URL: "https://hooks.example.com/a", Enabled: true, Secret: "whsec_test"})
	if err != nil {
		t.Fatal(err)
	}
	return st, hook
}

// TestATrimThatWasNotWrittenIsDueAgain: when the record that was to trim fails (here its lease is
// lost), the next record trims instead of waiting trimEvery more.
func TestATrimThatWasNotWrittenIsDueAgain(t *testing.T) {
	ctx := context.Background()
	st, hook := openWithWebhook(t)
	leased, err := st.LeaseWebhooks(ctx, "a", time.Minute)
	if err != nil || len(leased) != 1 {
		t.Fatalf("lease: %v, %d held", err, len(leased))
	}
	held := leased[0]
	attempt := store.WebhookAttempt{Sequence: held.Delivered + 1, Status: 500, At: time.Now()}
	// The first record of the subscription in this process is due to trim; made by a process that
	// holds no lease, it is refused.
	if _, err := st.RecordWebhookAttempt(ctx, "b", held, attempt, store.WebhookOutcome{Record: true}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a record without the lease: %v, want ErrLeaseLost", err)
	}
	if !st.webhookTrims.due(hook.ID) {
		t.Fatal("after a trim that was not written, the next record does not trim")
	}
	if st.webhookTrims.due(hook.ID) {
		t.Fatal("the record after a trim trims again")
	}
}
