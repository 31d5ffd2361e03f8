package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"usersd/store"
)

// webhookCases are the cases of the subscriptions' store, for a backend that keeps them.
var webhookCases = []struct {
	name string
	test func(t *testing.T, s store.Store, w store.Webhooks, clock *Clock)
}{
	{"a subscription is kept as given and starts after the newest change", testWebhookKept},
	{"one owner holds a subscription's lease until it expires or is given up", testWebhookLease},
	{"an attempt counts only from the lease holder of the subscription as it is now", testWebhookAttempts},
	{"a replay moves a subscription back, but not past the swept changes", testWebhookReplay},
	{"the sweep keeps the changes an enabled subscription has not been sent, for a week", testWebhookKeepsOwedChanges},
	{"only a subscription's most recent attempts are kept", testWebhookRecentAttempts},
}

// webhooksOf is the store's subscriptions, or a skip for a store that keeps none.
func webhooksOf(t *testing.T, s store.Store) store.Webhooks {
	w, ok := s.(store.Webhooks)
	if !ok {
		t.Skipf("%T keeps no webhook subscriptions", s)
	}
	return w
}

func newWebhook(t *testing.T, w store.Webhooks, url string) store.Webhook {
	t.Helper()
	created, err := w.CreateWebhook(context.Background(), store.Webhook{URL: url, Types: []string{"dev.usersd.user.created"}, Role: "admin", Secret: "whsec_first"})
	if err != nil {
		t.Fatalf("create webhook: %v", err)
	}
	return created
}

func testWebhookKept(t *testing.T, s store.Store, w store.Webhooks, _ *Clock) {
	ctx := context.Background()
	mustCreate(t, s, "before the subscription", "")
	latest := readEvents(t, s, 0, 10)[0].Sequence
	created := newWebhook(t, w, "https://example.com/hook")
	if created.ID <= 0 || created.URL != "https://example.com/hook" || !slices.Equal(created.Types, []string{"dev.usersd.user.created"}) ||
		created.Role != "admin" || !created.Enabled || created.Secret != "whsec_first" || created.Delivered != latest || created.Created.IsZero() {
		t.Fatalf("created %+v; want it as given, enabled, delivered up to %d", created, latest)
	}
	if got, err := w.GetWebhook(ctx, created.ID); err != nil || got.URL != created.URL || got.Generation != created.Generation {
		t.Fatalf("get: %+v, %v", got, err)
	}
	second := newWebhook(t, w, "https://example.com/second")
	if list, err := w.ListWebhooks(ctx); err != nil || len(list) != 2 || list[0].ID != created.ID || list[1].ID != second.ID {
		t.Fatalf("list: %+v, %v; want both, oldest first", list, err)
	}

	url, types, off := "https://example.org/other", []string{}, false
	updated, err := w.UpdateWebhook(ctx, created.ID, store.WebhookChanges{URL: &url, Types: &types, Enabled: &off})
	if err != nil || updated.URL != url || len(updated.Types) != 0 || updated.Role != "admin" || updated.Enabled || updated.Generation <= created.Generation {
		t.Fatalf("update: %+v, %v; want the new URL, every type, the same role, disabled, a new generation", updated, err)
	}
	until := time.Now().Add(24 * time.Hour).Truncate(time.Microsecond).UTC()
	rotated, err := w.RotateWebhookSecret(ctx, created.ID, "whsec_second", until)
	if err != nil || rotated.Secret != "whsec_second" || rotated.PreviousSecret != "whsec_first" || !rotated.PreviousSecretUntil.Equal(until) ||
		rotated.Generation <= updated.Generation {
		t.Fatalf("rotate: %+v, %v; want the new secret, the old one kept until %v", rotated, err, until)
	}
	if err := w.DeleteWebhook(ctx, created.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	for what, err := range map[string]error{
		"get":    errOf(w.GetWebhook(ctx, created.ID)),
		"update": errOf(w.UpdateWebhook(ctx, created.ID, store.WebhookChanges{URL: &url})),
		"rotate": errOf(w.RotateWebhookSecret(ctx, created.ID, "whsec_x", until)),
		"replay": errOf(w.ReplayWebhook(ctx, created.ID, latest)),
		"delete": w.DeleteWebhook(ctx, created.ID),
	} {
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s of a deleted subscription: %v, want ErrNotFound", what, err)
		}
	}
	if list, err := w.ListWebhooks(ctx); err != nil || len(list) != 1 || list[0].ID != second.ID {
		t.Fatalf("list after the delete: %+v, %v", list, err)
	}
}

// errOf is the error of a call that also returns a value.
func errOf[T any](_ T, err error) error { return err }

func testWebhookLease(t *testing.T, _ store.Store, w store.Webhooks, _ *Clock) {
	ctx := context.Background()
	hook := newWebhook(t, w, "https://example.com/hook")
	off := false
	disabled := newWebhook(t, w, "https://example.com/disabled")
	if _, err := w.UpdateWebhook(ctx, disabled.ID, store.WebhookChanges{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	lease := func(owner string, ttl time.Duration) []int32 {
		t.Helper()
		held, err := w.LeaseWebhooks(ctx, owner, ttl)
		if err != nil {
			t.Fatalf("lease for %s: %v", owner, err)
		}
		var ids []int32
		for _, h := range held {
			ids = append(ids, h.ID)
		}
		return ids
	}
	if got := lease("a", time.Minute); !slices.Equal(got, []int32{hook.ID}) {
		t.Fatalf("a leased %v; want the enabled subscription %d alone", got, hook.ID)
	}
	if got := lease("b", time.Minute); len(got) != 0 {
		t.Fatalf("b leased %v while a holds it", got)
	}
	if got := lease("a", 300*time.Millisecond); !slices.Equal(got, []int32{hook.ID}) {
		t.Fatalf("a renewing: %v", got)
	}
	// Leases run by the database's clock where processes share it, which a test cannot move: a
	// short lease is let run out.
	time.Sleep(500 * time.Millisecond)
	if got := lease("b", time.Minute); !slices.Equal(got, []int32{hook.ID}) {
		t.Fatalf("b leased %v after a's lease ran out", got)
	}
	if got := lease("a", time.Minute); len(got) != 0 {
		t.Fatalf("a leased %v back while b holds it", got)
	}
	if err := w.ReleaseWebhooks(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := lease("a", time.Minute); !slices.Equal(got, []int32{hook.ID}) {
		t.Fatalf("a leased %v after b gave it up", got)
	}
}

func testWebhookAttempts(t *testing.T, s store.Store, w store.Webhooks, _ *Clock) {
	ctx := context.Background()
	hook := newWebhook(t, w, "https://example.com/hook")
	first, second := mustCreate(t, s, "first", ""), mustCreate(t, s, "second", "")
	events := readEvents(t, s, hook.Delivered, 10)
	if len(events) != 2 || events[0].User.ID != first.ID || events[1].User.ID != second.ID {
		t.Fatalf("events after the subscription: %v", mapEvents(events))
	}
	held, err := w.LeaseWebhooks(ctx, "a", time.Minute)
	if err != nil || len(held) != 1 {
		t.Fatalf("lease: %+v, %v", held, err)
	}
	now := time.Now().Truncate(time.Microsecond).UTC()
	attempt := store.WebhookAttempt{Sequence: events[0].Sequence, Status: 500, Latency: 12 * time.Millisecond, Error: "500 Internal Server Error", At: now, NextAttempt: now.Add(5 * time.Second)}
	if _, err := w.RecordWebhookAttempt(ctx, "b", held[0], attempt, store.WebhookOutcome{Record: true}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("an attempt by another owner: %v, want ErrLeaseLost", err)
	}
	failed, err := w.RecordWebhookAttempt(ctx, "a", held[0], attempt, store.WebhookOutcome{Record: true})
	if err != nil || failed.FailedAttempts != 1 || !failed.FailingSince.Equal(now) || !failed.NextAttempt.Equal(attempt.NextAttempt) || failed.Delivered != hook.Delivered {
		t.Fatalf("a failed attempt: %+v, %v; want one failure since %v, the next at %v, nothing delivered", failed, err, now, attempt.NextAttempt)
	}
	delivered, err := w.RecordWebhookAttempt(ctx, "a", failed, store.WebhookAttempt{Sequence: events[0].Sequence, Status: 204, At: now.Add(5 * time.Second)}, store.WebhookOutcome{Delivered: true, Record: true})
	if err != nil || delivered.Delivered != events[0].Sequence || delivered.FailedAttempts != 0 || !delivered.NextAttempt.IsZero() {
		t.Fatalf("a delivery: %+v, %v; want delivered up to %d, no failures", delivered, err, events[0].Sequence)
	}
	// A caller's change in between (here the role) does not void the deliverer's attempt; a replay,
	// which moves the position, does.
	role := ""
	if _, err := w.UpdateWebhook(ctx, hook.ID, store.WebhookChanges{Role: &role}); err != nil {
		t.Fatal(err)
	}
	recorded, err := w.RecordWebhookAttempt(ctx, "a", delivered, store.WebhookAttempt{Sequence: events[1].Sequence, Status: 204, At: now}, store.WebhookOutcome{Delivered: true, Record: true})
	if err != nil || recorded.Delivered != events[1].Sequence || recorded.Role != "" {
		t.Fatalf("an attempt from before a role change: %+v, %v; want it counted", recorded, err)
	}
	if _, err := w.ReplayWebhook(ctx, hook.ID, hook.Delivered); err != nil {
		t.Fatal(err)
	}
	if _, err := w.RecordWebhookAttempt(ctx, "a", recorded, store.WebhookAttempt{Sequence: events[1].Sequence + 1, Status: 204, At: now}, store.WebhookOutcome{Delivered: true, Record: true}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("an attempt from before a replay: %v, want ErrLeaseLost", err)
	}
	current, err := w.LeaseWebhooks(ctx, "a", time.Minute)
	if err != nil || len(current) != 1 {
		t.Fatal(current, err)
	}
	gone, err := w.RecordWebhookAttempt(ctx, "a", current[0], store.WebhookAttempt{Sequence: events[0].Sequence, Status: 410, Error: "410 Gone", At: now}, store.WebhookOutcome{Disable: "the receiver answered 410 Gone", Record: true})
	if err != nil || gone.Enabled || gone.DisabledReason != "the receiver answered 410 Gone" || gone.Delivered != hook.Delivered {
		t.Fatalf("a 410: %+v, %v; want disabled with its reason, still at the replay's %d", gone, err, hook.Delivered)
	}
	if again, err := w.LeaseWebhooks(ctx, "a", time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("a disabled subscription leased: %+v, %v", again, err)
	}
	attempts, err := w.WebhookDeliveries(ctx, hook.ID, 10)
	if err != nil || len(attempts) != 4 || attempts[0].Status != 410 || attempts[1].Status != 204 || attempts[3].Status != 500 ||
		attempts[3].Latency != 12*time.Millisecond || attempts[3].Error != "500 Internal Server Error" || !attempts[3].At.Equal(now) {
		t.Fatalf("deliveries: %+v, %v; want the four attempts, newest first, as recorded", attempts, err)
	}
	on := true
	enabled, err := w.UpdateWebhook(ctx, hook.ID, store.WebhookChanges{Enabled: &on})
	if err != nil || !enabled.Enabled || enabled.DisabledReason != "" || enabled.FailedAttempts != 0 {
		t.Fatalf("enabled again: %+v, %v; want a fresh start", enabled, err)
	}
}

func testWebhookReplay(t *testing.T, s store.Store, w store.Webhooks, clock *Clock) {
	ctx := context.Background()
	mustCreate(t, s, "before", "")
	hook := newWebhook(t, w, "https://example.com/hook")
	replayed, err := w.ReplayWebhook(ctx, hook.ID, 0)
	if err != nil || replayed.Delivered != 0 || replayed.Generation <= hook.Generation || replayed.Replays != hook.Replays+1 {
		t.Fatalf("replay from the start: %+v, %v", replayed, err)
	}
	// Disabled, so that it holds nothing back from the sweep.
	off := false
	if _, err := w.UpdateWebhook(ctx, hook.ID, store.WebhookChanges{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(store.EventTTL + time.Minute)
	if n, err := s.DeleteExpiredUserEvents(ctx, 10); n != 1 || err != nil {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if _, err := w.ReplayWebhook(ctx, hook.ID, 0); !errors.Is(err, store.ErrEventsSwept) {
		t.Fatalf("replay from before the swept change: %v, want ErrEventsSwept", err)
	}
}

func testWebhookKeepsOwedChanges(t *testing.T, s store.Store, w store.Webhooks, clock *Clock) {
	ctx := context.Background()
	mustCreate(t, s, "before", "")
	hook := newWebhook(t, w, "https://example.com/hook")
	for i := range 3 {
		mustCreate(t, s, fmt.Sprintf("owed %d", i), "")
	}
	clock.Advance(store.EventTTL + time.Minute)
	if n, err := s.DeleteExpiredUserEvents(ctx, 10); n != 1 || err != nil {
		t.Fatalf("sweep a day later: %d, %v; want the one change the subscription does not owe", n, err)
	}
	if owed := readEvents(t, s, hook.Delivered, 10); len(owed) != 3 {
		t.Fatalf("after the sweep: %v, want the 3 owed changes", mapEvents(owed))
	}
	clock.Advance(store.WebhookOwedTTL)
	if n, err := s.DeleteExpiredUserEvents(ctx, 10); n != 3 || err != nil {
		t.Fatalf("sweep a week later: %d, %v; want the 3 owed changes, kept long enough", n, err)
	}
}

func testWebhookRecentAttempts(t *testing.T, s store.Store, w store.Webhooks, _ *Clock) {
	ctx := context.Background()
	hook := newWebhook(t, w, "https://example.com/hook")
	mustCreate(t, s, "first", "")
	held, err := w.LeaseWebhooks(ctx, "a", time.Minute)
	if err != nil || len(held) != 1 {
		t.Fatal(held, err)
	}
	current := held[0]
	const attempts = 105
	for i := range attempts {
		current, err = w.RecordWebhookAttempt(ctx, "a", current, store.WebhookAttempt{Sequence: hook.Delivered + 1, Status: int32(500 + i), At: time.Now()}, store.WebhookOutcome{Record: true})
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	kept, err := w.WebhookDeliveries(ctx, hook.ID, 1000)
	if err != nil || len(kept) != 100 || kept[0].Status != 500+attempts-1 || kept[99].Status != 500+attempts-100 {
		t.Fatalf("kept %d attempts (%v), want the newest 100", len(kept), err)
	}
	if current.FailedAttempts != attempts {
		t.Fatalf("failed attempts %d, want %d", current.FailedAttempts, attempts)
	}
}
