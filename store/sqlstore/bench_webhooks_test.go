package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"usersd/store"
)

// BenchmarkRecordWebhookAttempt records one delivered attempt after another for one subscription,
// each committed durably, as its deliverer does after every POST: what a delivery costs the store.
// Its history holds far more attempts than are kept, so every trim of it drops some.
//
//	go test ./store/sqlstore -run '^$' -bench RecordWebhookAttempt -cpu 1 -count 6
func BenchmarkRecordWebhookAttempt(b *testing.B) {
	st := benchSeeded(b, 1000)
	ctx := context.Background()
	if _, err := st.CreateWebhook(ctx, store.Webhook{URL: "https://hooks.example.com/usersd", Enabled: true, Secret: "whsec_bench"}); err != nil {
		b.Fatal(err)
	}
	leased, err := st.LeaseWebhooks(ctx, "bench", time.Hour)
	if err != nil || len(leased) != 1 {
		b.Fatalf("lease: %v, %d held", err, len(leased))
	}
	held := leased[0]
	record := func() {
		a := store.WebhookAttempt{Sequence: held.Delivered + 1, Status: 204, Latency: time.Millisecond, At: time.Now()}
		if held, err = st.RecordWebhookAttempt(ctx, "bench", held, a, store.WebhookOutcome{Delivered: true, Record: true}); err != nil {
			b.Fatal(err)
		}
	}
	for range 300 { // more than the kept history, so that every trim in the loop drops rows
		record()
	}
	b.ReportAllocs()
	for b.Loop() {
		record()
	}
}
