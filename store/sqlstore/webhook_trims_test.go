package sqlstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"usersd/store"
)

// TestTheHistoryOfAttemptsStaysBounded records many attempts of one subscription, and after each
// counts the rows its history holds: never more than recentDeliveries+trimEvery-1, and exactly
// recentDeliveries right after a trim, while WebhookDeliveries answers the newest recentDeliveries.
func TestTheHistoryOfAttemptsStaysBounded(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hook, err := st.CreateWebhook(ctx, store.Webhook{URL: "https://hooks.example.com/usersd", Enabled: true, Secret: "whsec_test"})
	if err != nil {
		t.Fatal(err)
	}
	leased, err := st.LeaseWebhooks(ctx, "a", time.Minute)
	if err != nil || len(leased) != 1 {
		t.Fatalf("lease: %v, %d held", err, len(leased))
	}
	held := leased[0]
	most, trimmed := 0, 0
	const attempts = 4*trimEvery + recentDeliveries
	for i := 1; i <= attempts; i++ {
		a := store.WebhookAttempt{Sequence: held.Delivered + 1, Status: int32(i), At: time.Now()}
		if held, err = st.RecordWebhookAttempt(ctx, "a", held, a, store.WebhookOutcome{Record: true}); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		var rows int
		if err := st.writer.QueryRowContext(ctx, `SELECT count(*) FROM webhook_deliveries WHERE webhook_id = $1`, hook.ID).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		most = max(most, rows)
		if i%trimEvery == 0 && i > recentDeliveries {
			if rows != recentDeliveries {
				t.Fatalf("after the trim at attempt %d the history holds %d rows, want %d", i, rows, recentDeliveries)
			}
			trimmed++
		}
	}
	if most > recentDeliveries+trimEvery-1 || trimmed == 0 {
		t.Fatalf("the history held up to %d rows (%d trims seen), want at most %d", most, trimmed, recentDeliveries+trimEvery-1)
	}
	kept, err := st.WebhookDeliveries(ctx, hook.ID, 1000)
	if err != nil || len(kept) != recentDeliveries || kept[0].Status != attempts || kept[recentDeliveries-1].Status != attempts-recentDeliveries+1 {
		t.Fatalf("answered %d attempts (%v), want the newest %d", len(kept), err, recentDeliveries)
	}
}
