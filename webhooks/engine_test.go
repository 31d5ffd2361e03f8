package webhooks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/proctest"
	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/users"
	"usersd/webhooks"
)

// loopback is the policy of these tests: their receivers listen on http://127.0.0.1.
var loopback = webhooks.Policy{AllowHTTP: true, AllowPrivate: true}

// setup opens a real SQLite store and runs an engine on it under policy until the test ends.
func setup(t *testing.T, policy webhooks.Policy) (*sqlstore.Store, *webhooks.Service) {
	t.Helper()
	return setupWithMetrics(t, policy, nil)
}

// setupWithMetrics is setup with an engine that reports to m.
func setupWithMetrics(t *testing.T, policy webhooks.Policy, m *webhooks.Metrics) (*sqlstore.Store, *webhooks.Service) {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	engine := webhooks.NewEngine(st, policy, "/usersd-test", slog.New(slog.NewTextHandler(io.Discard, nil)), m)
	go func() {
		defer close(done)
		engine.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		st.Close()
	})
	svc := webhooks.NewService(st, policy)
	svc.OnChange(engine.Poke) // as usersd wires them
	return st, svc
}

// delivery is one POST a receiver took.
type delivery struct {
	id, timestamp, signature, contentType string
	body                                  []byte
	event                                 struct {
		SpecVersion, ID, Source, Type, Time, Subject, DataContentType, Actor string
		Data                                                                 struct {
			ID   int32
			Name string
		}
	}
}

// receiver is a webhook endpoint on loopback that keeps what it is sent and answers with answer.
type receiver struct {
	*httptest.Server
	mu         sync.Mutex
	deliveries []delivery
	answer     func(n int) int // the status of the n-th request (from 0)
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	return newReceiverOn(t, "127.0.0.1:0", answer)
}

// newReceiverOn is newReceiver listening on addr: a receiver's address, back after it went away.
func newReceiverOn(t *testing.T, addr string, answer func(n int) int) *receiver {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	r := &receiver{answer: answer}
	r.Server = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		d := delivery{id: req.Header.Get("webhook-id"), timestamp: req.Header.Get("webhook-timestamp"),
			signature: req.Header.Get("webhook-signature"), contentType: req.Header.Get("Content-Type"), body: body}
		if err := json.Unmarshal(body, &d.event); err != nil {
			t.Errorf("a delivery's body is not a JSON event: %v: %s", err, body)
		}
		r.mu.Lock()
		status := r.answer(len(r.deliveries))
		r.deliveries = append(r.deliveries, d)
		r.mu.Unlock()
		w.WriteHeader(status)
	})}}
	r.Start()
	t.Cleanup(r.Close)
	return r
}

func always(status int) func(int) int { return func(int) int { return status } }

// failingFirst answers the first request with status, and 200 after.
func failingFirst(status int) func(int) int {
	return func(n int) int {
		if n == 0 {
			return status
		}
		return http.StatusOK
	}
}

func (r *receiver) taken() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.deliveries...)
}

// waitFor waits up to 30 s for n deliveries.
func (r *receiver) waitFor(t *testing.T, n int) []delivery {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := r.taken()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries within 30 s, want %d", len(got), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func subscribe(t *testing.T, svc *webhooks.Service, url string, types ...string) *usersv1.Webhook {
	t.Helper()
	res, err := svc.CreateWebhook(context.Background(), &usersv1.CreateWebhookRequest{Webhook: &usersv1.Webhook{Url: url, Types: types}})
	if err != nil {
		t.Fatalf("create a webhook for %s: %v", url, err)
	}
	return res.GetWebhook()
}

func createUsers(t *testing.T, st store.Store, n int, role string) []store.User {
	t.Helper()
	var out []store.User
	for i := range n {
		u, err := st.CreateUser(context.Background(), store.NewUser{Name: fmt.Sprintf("User %d", i), Role: role}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// verify checks a delivery's signature as Standard Webhooks 1.0 says a receiver does, with each
// secret in turn: HMAC-SHA256 over "id.timestamp.body", keyed by the base64 after whsec_, one of the
// space-separated "v1,<base64>" values.
func verify(t *testing.T, d delivery, secret string) bool {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatalf("secret %q: %v", secret, err)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", d.id, d.timestamp, d.body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, s := range strings.Fields(d.signature) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

func TestEveryChangeIsDeliveredOnceInOrderSignedAsCloudEvents(t *testing.T) {
	st, svc := setup(t, loopback)
	r := newReceiver(t, always(http.StatusNoContent))
	hook := subscribe(t, svc, r.URL+"/hooks")
	if !strings.HasPrefix(hook.GetSecret(), "whsec_") || !hook.GetEnabled() {
		t.Fatalf("created %v; want it enabled, with its whsec_ secret", hook)
	}
	made := createUsers(t, st, 20, "editor")
	name := "Renamed"
	if _, err := st.UpdateUser(context.Background(), made[3].ID, store.UserChanges{Name: &name}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteUser(context.Background(), made[5].ID, nil); err != nil {
		t.Fatal(err)
	}
	got := r.waitFor(t, 22)
	time.Sleep(200 * time.Millisecond)
	if n := len(r.taken()); n != 22 {
		t.Fatalf("%d deliveries, want 22: each change once", n)
	}
	var previous int64
	for i, d := range got {
		sequence, err := strconv.ParseInt(d.event.ID, 10, 64)
		if err != nil || sequence <= previous {
			t.Fatalf("delivery %d has id %q after %d: want increasing sequences", i, d.event.ID, previous)
		}
		previous = sequence
		if d.id != d.event.ID || !verify(t, d, hook.GetSecret()) {
			t.Errorf("delivery %d: webhook-id %q, event id %q, signature %q does not verify", i, d.id, d.event.ID, d.signature)
		}
		if ts, _ := strconv.ParseInt(d.timestamp, 10, 64); time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
			t.Errorf("delivery %d: webhook-timestamp %q is not now", i, d.timestamp)
		}
		e := d.event
		if e.SpecVersion != "1.0" || e.Source != "/usersd-test" || e.DataContentType != "application/json" || !strings.HasPrefix(d.contentType, "application/cloudevents+json") {
			t.Errorf("delivery %d is not a structured CloudEvent: %+v, %s", i, e, d.contentType)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.Time); err != nil {
			t.Errorf("delivery %d: time %q: %v", i, e.Time, err)
		}
	}
	for i := range 20 {
		// User 5 is deleted below: a change of a user since deleted carries its id alone, as every
		// watch has it (the log forgets a deleted user's name), if it is sent after the delete.
		name := createdName(got[i].event.Data.Name, made[i].Name, i == 5)
		if e := got[i].event; e.Type != "dev.usersd.user.created" || e.Subject != fmt.Sprintf("users/%d", made[i].ID) || e.Data.ID != made[i].ID || e.Data.Name != name {
			t.Errorf("delivery %d: %+v; want the create of user %d", i, e, made[i].ID)
		}
	}
	if e := got[20].event; e.Type != "dev.usersd.user.updated" || e.Data.Name != "Renamed" {
		t.Errorf("delivery 20: %+v, want the rename", e)
	}
	if e := got[21].event; e.Type != "dev.usersd.user.deleted" || e.Data.ID != made[5].ID {
		t.Errorf("delivery 21: %+v, want the delete of user %d", e, made[5].ID)
	}
	// The subscription says how far it got, and so do its deliveries.
	after, err := svc.GetWebhook(context.Background(), &usersv1.GetWebhookRequest{Id: hook.GetId()})
	if err != nil || after.GetWebhook().GetDeliveredSequence() != previous || after.GetWebhook().GetSecret() != "" {
		t.Fatalf("after: %v, %v; want delivered up to %d, and no secret shown", after, err, previous)
	}
	list, err := svc.ListWebhookDeliveries(context.Background(), &usersv1.ListWebhookDeliveriesRequest{Id: hook.GetId()})
	if err != nil || len(list.GetDeliveries()) != 22 || list.GetDeliveries()[0].GetSequence() != previous || list.GetDeliveries()[0].GetStatus() != 204 {
		t.Fatalf("deliveries: %d, %v; want the 22, newest first", len(list.GetDeliveries()), err)
	}
}

// createdName is the name a create's event carries: the user's, or none for a user deleted since, whose
// create may be sent after its delete.
func createdName(got, made string, deletedSince bool) string {
	if deletedSince && got == "" {
		return ""
	}
	return made
}

func TestTypesAndRoleChooseTheChanges(t *testing.T) {
	st, svc := setup(t, loopback)
	updates := newReceiver(t, always(http.StatusOK))
	admins := newReceiver(t, always(http.StatusOK))
	subscribe(t, svc, updates.URL, "dev.usersd.user.updated")
	if _, err := svc.CreateWebhook(context.Background(), &usersv1.CreateWebhookRequest{Webhook: &usersv1.Webhook{Url: admins.URL, Role: "admin"}}); err != nil {
		t.Fatal(err)
	}
	editors := createUsers(t, st, 3, "editor")
	adminsMade := createUsers(t, st, 2, "admin")
	role := "admin"
	if _, err := st.UpdateUser(context.Background(), editors[0].ID, store.UserChanges{Role: &role}, nil); err != nil {
		t.Fatal(err)
	}
	got := updates.waitFor(t, 1)
	if got[0].event.Type != "dev.usersd.user.updated" || got[0].event.Data.ID != editors[0].ID {
		t.Fatalf("the updates' subscription got %+v", got[0].event)
	}
	a := admins.waitFor(t, 3)
	if a[0].event.Data.ID != adminsMade[0].ID || a[1].event.Data.ID != adminsMade[1].ID || a[2].event.Data.ID != editors[0].ID {
		t.Fatalf("the admins' subscription got %v", a)
	}
	time.Sleep(300 * time.Millisecond)
	if len(updates.taken()) != 1 || len(admins.taken()) != 3 {
		t.Fatalf("got %d and %d deliveries, want 1 and 3", len(updates.taken()), len(admins.taken()))
	}
}

func TestAFailedDeliveryIsTriedAgainAndNothingOvertakesIt(t *testing.T) {
	st, svc := setup(t, loopback)
	r := newReceiver(t, failingFirst(http.StatusServiceUnavailable))
	hook := subscribe(t, svc, r.URL)
	made := createUsers(t, st, 3, "")
	got := r.waitFor(t, 4) // the first twice, then the others
	for i, want := range []int32{made[0].ID, made[0].ID, made[1].ID, made[2].ID} {
		if got[i].event.Data.ID != want {
			t.Fatalf("delivery %d is of user %d, want %d: %v", i, got[i].event.Data.ID, want, got)
		}
	}
	if got[0].id != got[1].id {
		t.Fatalf("the retry has webhook-id %q, the first attempt %q: want the same", got[1].id, got[0].id)
	}
	list, err := svc.ListWebhookDeliveries(context.Background(), &usersv1.ListWebhookDeliveriesRequest{Id: hook.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	first := list.GetDeliveries()[len(list.GetDeliveries())-1]
	if first.GetStatus() != 503 || !strings.Contains(first.GetError(), "503") || first.GetNextAttemptTime() == nil {
		t.Fatalf("the first attempt is recorded as %v; want the 503, its error and its next attempt", first)
	}
}

// replayedAfterTheFirstOfThree makes a subscription, waits until it has been sent the creates of
// three users, and replays it from after the first: the store, the receiver, the users made and
// the replay's sequence.
func replayedAfterTheFirstOfThree(t *testing.T) (*sqlstore.Store, *receiver, []store.User, int64) {
	t.Helper()
	st, svc := setup(t, loopback)
	r := newReceiver(t, always(http.StatusOK))
	hook := subscribe(t, svc, r.URL)
	made := createUsers(t, st, 3, "")
	first := r.waitFor(t, 3)
	after, err := strconv.ParseInt(first[0].id, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ReplayWebhook(context.Background(), &usersv1.ReplayWebhookRequest{Id: hook.GetId(), AfterSequence: after}); err != nil {
		t.Fatal(err)
	}
	return st, r, made, after
}

// TestAReplaySendsTheChangesAgainInOrder: a replay of a subscription that has been sent everything
// sends every change after the replay's sequence again, in order, from the deliverer that holds it.
func TestAReplaySendsTheChangesAgainInOrder(t *testing.T) {
	_, r, made, after := replayedAfterTheFirstOfThree(t)
	got := r.waitFor(t, 5)
	if got[3].event.Data.ID != made[1].ID || got[4].event.Data.ID != made[2].ID {
		t.Fatalf("after a replay from %d: %v; want the creates of users %d and %d again", after, got[3:], made[1].ID, made[2].ID)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(r.taken()); n != 5 {
		t.Fatalf("%d deliveries, want 5: each replayed change once", n)
	}
}

// TestACallersSubscriptionIsTakenUpAtOnce: a subscription made, enabled again or replayed through
// this process's service is delivered from its next change at once, not at the engine's next lease
// round (every 3 s).
func TestACallersSubscriptionIsTakenUpAtOnce(t *testing.T) {
	st, svc := setup(t, loopback)
	ctx := context.Background()
	r := newReceiver(t, always(http.StatusOK))
	time.Sleep(200 * time.Millisecond) // the engine's first lease round is over: the next is 3 s away
	within := func(what string, n int, since time.Time) {
		t.Helper()
		r.waitFor(t, n)
		if took := time.Since(since); took > 1500*time.Millisecond {
			t.Errorf("%s: delivered %s after, want well within a lease round", what, took.Round(time.Millisecond))
		}
	}

	made := time.Now()
	hook := subscribe(t, svc, r.URL)
	createUsers(t, st, 1, "")
	within("a new subscription", 1, made)

	pause := &usersv1.UpdateWebhookRequest{Id: hook.GetId(), Webhook: &usersv1.Webhook{}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"enabled"}}}
	if _, err := svc.UpdateWebhook(ctx, pause); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the paused deliverer has stopped
	resumed := time.Now()
	pause.Webhook.Enabled = true
	if _, err := svc.UpdateWebhook(ctx, pause); err != nil {
		t.Fatal(err)
	}
	createUsers(t, st, 1, "")
	within("a subscription enabled again", 2, resumed)

	replayed := time.Now()
	if _, err := svc.ReplayWebhook(ctx, &usersv1.ReplayWebhookRequest{Id: hook.GetId(), AfterSequence: 0}); err != nil {
		t.Fatal(err)
	}
	within("a replay of an idle subscription", 4, replayed)
}

// TestAReplayEndsABackoff: a replay of a subscription waiting to try a failed change again (2.5 s
// at least after a first failure) sends from the replay's position at once.
func TestAReplayEndsABackoff(t *testing.T) {
	st, svc := setup(t, loopback)
	r := newReceiver(t, failingFirst(http.StatusInternalServerError))
	hook := subscribe(t, svc, r.URL)
	createUsers(t, st, 1, "")
	r.waitFor(t, 1)
	if failed := lastAttempt(t, svc, hook.GetId()); failed.GetNextAttemptTime() == nil {
		t.Fatalf("the first attempt's record: %v; want a failure with its next attempt", failed)
	}
	replayed := time.Now()
	if _, err := svc.ReplayWebhook(context.Background(), &usersv1.ReplayWebhookRequest{Id: hook.GetId(), AfterSequence: 0}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, 2)
	if took := time.Since(replayed); took > 1500*time.Millisecond {
		t.Errorf("the replay was sent %s after it was made; want it at once, not after the backoff", took.Round(time.Millisecond))
	}
}

// TestACallersChangeHoldsForEveryChangeLoggedAfterIt: once a pause, a new URL or a delete has been
// answered, no change logged after it is sent the old way, though the engine's lease round, which
// also brings changed subscriptions, is seconds away: a deliverer reads its subscription again after
// each page of the log.
func TestACallersChangeHoldsForEveryChangeLoggedAfterIt(t *testing.T) {
	st, svc := setup(t, loopback)
	ctx := context.Background()
	old, moved := newReceiver(t, always(http.StatusOK)), newReceiver(t, always(http.StatusOK))
	hook := subscribe(t, svc, old.URL)
	createUsers(t, st, 1, "")
	old.waitFor(t, 1) // the deliverer runs, and has sent everything

	if _, err := svc.UpdateWebhook(ctx, &usersv1.UpdateWebhookRequest{Id: hook.GetId(), Webhook: &usersv1.Webhook{},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"enabled"}}}); err != nil {
		t.Fatal(err)
	}
	paused := createUsers(t, st, 2, "")
	time.Sleep(4 * time.Second) // past a lease round
	if got := old.taken(); len(got) != 1 {
		t.Fatalf("a paused subscription was sent %d changes made after the pause", len(got)-1)
	}

	if _, err := svc.UpdateWebhook(ctx, &usersv1.UpdateWebhookRequest{Id: hook.GetId(), Webhook: &usersv1.Webhook{Url: moved.URL, Enabled: true}}); err != nil {
		t.Fatal(err)
	}
	got := moved.waitFor(t, 2) // resumed where it stopped, at the new URL
	if got[0].event.Data.ID != paused[0].ID || got[1].event.Data.ID != paused[1].ID {
		t.Fatalf("after the resume at a new URL: %v; want the creates of users %d and %d", got, paused[0].ID, paused[1].ID)
	}
	if _, err := svc.UpdateWebhook(ctx, &usersv1.UpdateWebhookRequest{Id: hook.GetId(), Webhook: &usersv1.Webhook{Url: old.URL}}); err != nil {
		t.Fatal(err)
	}
	back := createUsers(t, st, 1, "")
	if got := old.waitFor(t, 2); got[1].event.Data.ID != back[0].ID {
		t.Fatalf("after the URL moved back: %v", got)
	}
	if _, err := svc.DeleteWebhook(ctx, &usersv1.DeleteWebhookRequest{Id: hook.GetId()}); err != nil {
		t.Fatal(err)
	}
	createUsers(t, st, 2, "")
	time.Sleep(4 * time.Second)
	if len(moved.taken()) != 2 || len(old.taken()) != 2 {
		t.Fatalf("after the moves and the delete, the receivers got %d and %d changes; want 2 each", len(old.taken()), len(moved.taken()))
	}
}

// TestAReplayFollowedAtOnceByAChangeSendsTheReplayFirst: a change logged right after a replay,
// before the engine's lease round brings the replayed copy, is read from the old position; it must
// not be sent (and recorded) ahead of the replayed changes, which would skip them.
func TestAReplayFollowedAtOnceByAChangeSendsTheReplayFirst(t *testing.T) {
	st, r, made, after := replayedAfterTheFirstOfThree(t)
	late := createUsers(t, st, 1, "")
	got := r.waitFor(t, 6)
	for i, want := range []int32{made[1].ID, made[2].ID, late[0].ID} {
		if got[3+i].event.Data.ID != want {
			t.Fatalf("after a replay from %d and one more create: %v; want users %d, %d, then %d", after, got[3:], made[1].ID, made[2].ID, late[0].ID)
		}
	}
}

func TestA410DisablesTheSubscription(t *testing.T) {
	st, svc := setup(t, loopback)
	r := newReceiver(t, always(http.StatusGone))
	hook := subscribe(t, svc, r.URL)
	createUsers(t, st, 3, "")
	r.waitFor(t, 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := svc.GetWebhook(context.Background(), &usersv1.GetWebhookRequest{Id: hook.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if !got.GetWebhook().GetEnabled() {
			if !strings.Contains(got.GetWebhook().GetDisabledReason(), "410") {
				t.Fatalf("disabled for %q, want the 410", got.GetWebhook().GetDisabledReason())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a subscription whose receiver answered 410 is still enabled after 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(r.taken()); n != 1 {
		t.Fatalf("%d deliveries after a 410, want 1", n)
	}
	// Enabling it again resumes where it stopped.
	r.mu.Lock()
	r.answer = always(http.StatusOK)
	r.mu.Unlock()
	if _, err := svc.UpdateWebhook(context.Background(), &usersv1.UpdateWebhookRequest{Id: hook.GetId(), Webhook: &usersv1.Webhook{Enabled: true}}); err != nil {
		t.Fatal(err)
	}
	if got := r.waitFor(t, 4); got[1].id != got[0].id {
		t.Fatalf("after enabling, the first delivery is %s, want %s again", got[1].id, got[0].id)
	}
}

func TestNoRedirectIsFollowedAndAnswersAreReadUpTo64KiB(t *testing.T) {
	st, svc := setup(t, loopback)
	target := newReceiver(t, always(http.StatusOK))
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := make([]byte, 1<<20)
		for range 10 { // 10 MB, of which 64 KiB are read
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(huge.Close)
	redirected := subscribe(t, svc, redirect.URL)
	large := subscribe(t, svc, huge.URL)
	createUsers(t, st, 1, "")
	if got := lastAttempt(t, svc, redirected.GetId()); got.GetStatus() != http.StatusTemporaryRedirect || got.GetError() == "" {
		t.Errorf("a redirect is recorded as %v; want a failed 307", got)
	}
	if got := lastAttempt(t, svc, large.GetId()); got.GetStatus() != http.StatusOK || got.GetError() != "" {
		t.Errorf("a 10 MB answer is recorded as %v; want delivered", got)
	}
	if n := len(target.taken()); n != 0 {
		t.Fatalf("the redirect's target got %d deliveries; a redirect must not be followed", n)
	}
}

func TestAHangingReceiverHoldsUpNoOtherSubscription(t *testing.T) {
	st, svc := setup(t, loopback)
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(func() { close(release); hanging.Close() })
	fast := newReceiver(t, always(http.StatusOK))
	subscribe(t, svc, hanging.URL)
	subscribe(t, svc, fast.URL)
	began := time.Now()
	createUsers(t, st, 10, "")
	fast.waitFor(t, 10)
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the fast receiver took %v to get 10 changes while the other hung", took)
	}
}

func TestBadSubscriptionsAreRefusedAndMakeNothing(t *testing.T) {
	_, svc := setup(t, webhooks.Policy{AllowHTTP: true})
	for _, c := range []struct {
		name string
		hook *usersv1.Webhook
	}{
		{"no URL", &usersv1.Webhook{}},
		{"a relative URL", &usersv1.Webhook{Url: "/hooks"}},
		{"another scheme", &usersv1.Webhook{Url: "ftp://example.com/hooks"}},
		{"http off loopback", &usersv1.Webhook{Url: "http://example.com/hooks"}},
		{"a user and password", &usersv1.Webhook{Url: "https://me:secret@example.com/hooks"}},
		{"a fragment", &usersv1.Webhook{Url: "https://example.com/hooks#part"}},
		{"too long", &usersv1.Webhook{Url: "https://example.com/" + strings.Repeat("a", 2048)}},
		{"a loopback address", &usersv1.Webhook{Url: "http://127.0.0.1:9/hooks"}},
		{"a private address", &usersv1.Webhook{Url: "https://10.1.2.3/hooks"}},
		{"a link-local address", &usersv1.Webhook{Url: "https://169.254.169.254/latest"}},
		{"a unique-local address", &usersv1.Webhook{Url: "https://[fd00::1]/hooks"}},
		{"a host that does not resolve", &usersv1.Webhook{Url: "https://no-such-host.invalid/hooks"}},
		{"an unknown type", &usersv1.Webhook{Url: "https://93.184.215.14/hooks", Types: []string{"dev.usersd.user.renamed"}}},
		{"a role with a control character", &usersv1.Webhook{Url: "https://93.184.215.14/hooks", Role: "ad\x00min"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := svc.CreateWebhook(context.Background(), &usersv1.CreateWebhookRequest{Webhook: c.hook})
			if codeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("%v: %v, want invalid_argument", c.hook, err)
			}
		})
	}
	list, err := svc.ListWebhooks(context.Background(), &usersv1.ListWebhooksRequest{})
	if err != nil || len(list.GetWebhooks()) != 0 {
		t.Fatalf("after refused creates: %v, %v; want none", list, err)
	}
	if _, err := svc.UpdateWebhook(context.Background(), &usersv1.UpdateWebhookRequest{Id: 1, Webhook: &usersv1.Webhook{}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"secret"}}}); codeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("an update of the secret: %v, want invalid_argument", err)
	}
	if _, err := svc.GetWebhook(context.Background(), &usersv1.GetWebhookRequest{Id: 7}); codeOf(err) != connect.CodeNotFound {
		t.Fatalf("a missing subscription: %v, want not_found", err)
	}
}

// A subscription made while private addresses were allowed is refused at each connection by a
// server that no longer allows them: after DNS, whatever the URL said at creation.
func TestAPrivateAddressIsRefusedAtEveryConnection(t *testing.T) {
	st, svc := setup(t, webhooks.Policy{AllowHTTP: true})
	r := newReceiver(t, always(http.StatusOK))
	hook := subscribe(t, webhooks.NewService(st, loopback), r.URL)
	createUsers(t, st, 1, "")
	if got := lastAttempt(t, svc, hook.GetId()); got.GetStatus() != 0 || !strings.Contains(got.GetError(), "private") {
		t.Fatalf("the attempt is recorded as %v; want refused for its address", got)
	}
	if n := len(r.taken()); n != 0 {
		t.Fatalf("the receiver on loopback got %d deliveries", n)
	}
}

// lastAttempt waits up to 15 s for the subscription's first recorded attempt, and returns the newest.
func lastAttempt(t *testing.T, svc *webhooks.Service, id int32) *usersv1.WebhookDelivery {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		list, err := svc.ListWebhookDeliveries(context.Background(), &usersv1.ListWebhookDeliveriesRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.GetDeliveries()) > 0 {
			return list.GetDeliveries()[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no attempt of subscription %d recorded within 15 s", id)
		}
	}
}

// codeOf is the RPC code of a service error, as the faces send it.
func codeOf(err error) connect.Code {
	var e *users.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return connect.CodeUnknown
}

// TestAReceiverDownForTwoMinutesGetsEverythingAfterInOrder: a receiver that refuses connections for
// two minutes while changes are made gets every one of them once it is back, in order, each once
// (the attempts that found it down were never delivered), within the backoff's next try.
func TestAReceiverDownForTwoMinutesGetsEverythingAfterInOrder(t *testing.T) {
	t.Parallel() // about three minutes of waiting, beside the other tests
	st, svc := setup(t, loopback)
	r := newReceiver(t, always(http.StatusOK))
	hook := subscribe(t, svc, r.URL)
	createUsers(t, st, 5, "")
	r.waitFor(t, 5)
	// Down: the port refuses connections until a receiver listens on it again.
	addr := r.Listener.Addr().String()
	r.Close()
	var during []store.User
	for range 12 { // a change every ten seconds for two minutes
		during = append(during, createUsers(t, st, 1, "")...)
		time.Sleep(10 * time.Second)
	}
	back := newReceiverOn(t, addr, always(http.StatusOK))
	deadline := time.Now().Add(3 * time.Minute)
	for len(back.taken()) < len(during) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	got := back.taken()
	if len(got) != len(during) {
		t.Fatalf("%d deliveries within 3 minutes of the receiver's return, want the %d changes made while it was down", len(got), len(during))
	}
	for i, d := range got {
		if d.event.Data.ID != during[i].ID {
			t.Fatalf("delivery %d after the return is of user %d, want %d: in order, each once", i, d.event.Data.ID, during[i].ID)
		}
	}
	list, err := svc.GetWebhook(context.Background(), &usersv1.GetWebhookRequest{Id: hook.GetId()})
	if err != nil || !list.GetWebhook().GetEnabled() || list.GetWebhook().GetFailedAttempts() != 0 {
		t.Fatalf("after: %v, %v; want enabled, its failures cleared", list, err)
	}
}

// TestDeliveriesVerifyWithOtherPeoplesLibraries checks deliveries as receivers check them: the
// signature with the Standard Webhooks library, the envelope with the CloudEvents SDK (npm packages
// standardwebhooks and cloudevents, in web/node_modules), across a secret's rotation, when both
// secrets sign.
func TestDeliveriesVerifyWithOtherPeoplesLibraries(t *testing.T) {
	node, err := exec.LookPath("node")
	modules, _ := filepath.Abs("../web/node_modules")
	if err == nil {
		_, err = os.Stat(filepath.Join(modules, "standardwebhooks"))
	}
	if err != nil {
		proctest.MissingTool(t, "USERS_REQUIRE_NODE", "needs node and web/node_modules ("+err.Error()+"): run npm ci in web/")
	}
	st, svc := setup(t, loopback)
	var mu sync.Mutex
	type captured struct {
		Secret  string            `json:"secret"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	var deliveries []captured
	secret := ""
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		headers := map[string]string{}
		for name := range r.Header {
			headers[strings.ToLower(name)] = r.Header.Get(name)
		}
		mu.Lock()
		deliveries = append(deliveries, captured{Secret: secret, Headers: headers, Body: string(body)})
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)
	hook := subscribe(t, svc, receiver.URL)
	mu.Lock()
	secret = hook.GetSecret()
	mu.Unlock()
	made := createUsers(t, st, 3, "admin")
	waitForCount(t, &mu, func() int { return len(deliveries) }, 3)
	// After a rotation the receiver may hold either secret: the old one still verifies, and so
	// does the new.
	rotated, err := svc.RotateWebhookSecret(context.Background(), &usersv1.RotateWebhookSecretRequest{Id: hook.GetId()})
	if err != nil || rotated.GetWebhook().GetSecret() == hook.GetSecret() {
		t.Fatalf("rotate: %v, %v", rotated, err)
	}
	time.Sleep(4 * time.Second) // the deliverer takes the new secret up when the leases are renewed (every 3 s)
	if err := st.DeleteUser(context.Background(), made[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	waitForCount(t, &mu, func() int { return len(deliveries) }, 4)
	mu.Lock()
	last := deliveries[3]
	deliveries = append(deliveries, last)
	deliveries[4].Secret = rotated.GetWebhook().GetSecret()
	out, _ := json.Marshal(deliveries)
	mu.Unlock()
	file := filepath.Join(t.TempDir(), "deliveries.json")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "testdata/verify.cjs", file)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	result, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(result)) != "verified 5" {
		t.Fatalf("node testdata/verify.cjs: %v\n%s", err, result)
	}
}

func waitForCount(t *testing.T, mu *sync.Mutex, count func() int, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		got := count()
		mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries within 20 s, want %d", got, n)
		}
	}
}
