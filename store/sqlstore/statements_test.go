package sqlstore

import (
	"context"
	"errors"
	"testing"

	"usersd/store"
)

// TestAReadRepeatedOnTheWriterIsPreparedOnce: GetWebhook, which a deliverer runs after every page
// of the log, is kept prepared on SQLite's writer after its first run, and the kept statement reads
// what writes change afterwards.
func TestAReadRepeatedOnTheWriterIsPreparedOnce(t *testing.T) {
	ctx := context.Background()
	st, hook := openWithWebhook(t)
	if _, err := st.GetWebhook(ctx, hook.ID); err != nil {
		t.Fatal(err)
	}
	st.kept.prepareMissing() // what the first read started in the background, done now
	query := `SELECT ` + webhookColumns + ` FROM webhooks WHERE id = $1`
	if st.kept.find(query) == nil {
		t.Fatal("GetWebhook's statement is not kept after its first run")
	}
	url := "https://hooks.example.com/b"
	if _, err := st.UpdateWebhook(ctx, hook.ID, store.WebhookChanges{URL: &url}); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetWebhook(ctx, hook.ID)
	if err != nil || got.URL != url {
		t.Fatalf("read %q (%v) on the kept statement, want %q", got.URL, err, url)
	}
	if _, err := st.GetWebhook(ctx, hook.ID+1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a missing subscription read %v on the kept statement, want ErrNotFound", err)
	}
}
