package handlers

// The fixture that every fuzz target of this package drives: the real handler (handlers.New) on a
// real in-memory SQLite store, made once per target and process and reused across inputs, and the
// invariants that every answer must keep (docs/API.md#the-routes):
//
//   - no panic and no fault: every status is 2xx or 4xx (304 only where a target allows it), no
//     answer says "Internal Server Error", and nothing is logged at warning level or above;
//   - every 4xx body is exactly {"error": "<non-empty string>"};
//   - every other body is empty (204, 304) or JSON;
//   - nothing is stored on a 4xx, and a 2xx changes only what its request names.
//
// The handler reaches the store through fzStore, which passes every call on and notes the calls
// that may write and the idempotency keys that are reserved and not yet completed or released.
// After an input that called a writing method, the store is compared with the baseline, a snapshot
// of the seeded data. An input that called no writing method cannot have changed anything, and
// needs no snapshot: that keeps the 4xx inputs, most of what a fuzzer makes, fast. Every input must
// also leave no key reserved: a create that fails gives its key back (docs/API.md#safe-retries-and-concurrent-edits).
//
// When a 2xx answer changed the store, the next input must meet the seed data again, so that a
// failing input reproduces on its own and coverage depends on the input alone. The store is seeded
// afresh (ids, versions and the fixture's clock included), or, in a fixture made with restore, put
// back in a few writes: created users deleted, changed fields of seed users written back, posts
// kept. Seeding takes milliseconds, and the fuzzer runs a valid input hundreds of times when it
// minimizes it, so the body targets restore; what differs then (versions, post ids, updatedAt) is
// nothing that their checks look at.
//
// Every name here starts with fz, so that the fuzz files cannot collide with other tests of the
// package.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	usersv1 "usersd/gen/users/v1"
	"usersd/handlers/apierror"
	"usersd/handlers/restbody"
	"usersd/internal/apitest"
	"usersd/store"
	"usersd/store/sqlstore"
	"usersd/users"
)

// fzHang is how long one input may run before the fixture takes it for a hang. Requests have a
// deadline of fzRequestTimeout, so a request that waits for the store ends well before.
const (
	fzHang           = 30 * time.Second
	fzRequestTimeout = 5 * time.Second
)

// fzAPIKey is the one key of the fixture's handler.
const fzAPIKey = "fuzz-key"

// fzMaxBodyBytes is the fixture's body limit: small enough for a fuzzed body to pass it (so the
// 413 path is fuzzed too), and for the inputs to stay small, which keeps the fuzzer's minimizing
// of each new input short; large enough for a name or title of 200 characters. (A post body of
// more than maxBodyLength characters is then answered 413, so its 400 is not fuzzed here.)
const fzMaxBodyBytes = 2 << 10

// The seed data. A fresh store hands out ids from 1, so user i of fzSeedUsers has id i+1; every
// seed post belongs to fzAda.
var (
	fzSeedUsers = []store.NewUser{
		{Name: "Ada", Role: "admin"},
		{Name: "bob", Role: ""},
		{Name: "Cy", Role: "admin"},
		{Name: "Émile", Role: "editor"},
		{Name: "Ada", Role: "viewer"},
	}
	fzSeedPosts = []store.NewPost{
		{Title: "hello", Body: "first post"},
		{Title: "second", Body: ""},
		{Title: "third", Body: "two\nlines"},
	}
)

// fzBulkNames and fzBulkRoles make the bulk users of a fixture that needs more than a page of
// them: names and roles repeat (ties), differ in case only, and hold non-ASCII text.
var (
	fzBulkNames = []string{"Ada", "ada", "Bo", "Zoë", "émile", "Ω", "bob"}
	fzBulkRoles = []string{"", "admin", "editor", "viewer", "Admin", "a b"}
)

// fzAda is the seed user that the single-user targets work on. In a freshly seeded store it has
// version 1, so its etag is "1".
const (
	fzAda     int32 = 1
	fzAdaETag       = `"1"`
)

// fzOptions shape the fixture of one target.
type fzOptions struct {
	// bulk users follow the seed users, for the collection query; they are never written to, and
	// their posts are not in snapshots.
	bulk int
	// restore puts the store back after a 2xx write instead of seeding it afresh (see above). A
	// target that depends on versions or ids must not set it.
	restore bool
	// allPosts takes the posts of every seed user into snapshots, not only fzAda's (the only seed
	// user with posts): for a target that may post to any of them.
	allPosts bool
}

// fzFixture is the handler and store of one fuzz target in one process.
type fzFixture struct {
	fzOptions
	st       *fzStore
	h        http.Handler
	log      *fzLog
	baseline fzSnapshot
}

// fzNewFixture makes the handler and seeds a fresh store; the store is closed when the target ends.
func fzNewFixture(f *testing.F, opts fzOptions) *fzFixture {
	f.Helper()
	fx := &fzFixture{fzOptions: opts, log: &fzLog{}, st: &fzStore{}}
	if err := fx.seed(); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { fx.st.Close() })
	h, err := New(Config{Store: fx.st, Keys: testKeys(fzAPIKey), Logger: slog.New(fx.log),
		MaxBodyBytes: fzMaxBodyBytes, RequestTimeout: fzRequestTimeout})
	if err != nil {
		f.Fatal(err)
	}
	fx.h = h
	return fx
}

// seed replaces the store under the handler with a fresh one holding the seed data, and takes its
// snapshot.
func (fx *fzFixture) seed() error {
	ctx := context.Background()
	if fx.st.Store != nil {
		fx.st.Close()
	}
	clock := fzClock{}
	st, err := sqlstore.Open(ctx, ":memory:", sqlstore.WithClock(clock.now))
	if err != nil {
		return fmt.Errorf("open the store: %w", err)
	}
	*fx.st = fzStore{Store: st}
	for i, nu := range fzSeedUsers {
		u, err := st.CreateUser(ctx, nu, nil)
		if err != nil {
			return fmt.Errorf("seed user: %w", err)
		}
		if u.ID != int32(i+1) {
			return fmt.Errorf("seed user %d got id %d: the fixture assumes ids from 1", i, u.ID)
		}
	}
	for i := range fx.bulk {
		nu := store.NewUser{Name: fzBulkNames[i%len(fzBulkNames)], Role: fzBulkRoles[i*5%len(fzBulkRoles)]}
		if _, err := st.CreateUser(ctx, nu, nil); err != nil {
			return fmt.Errorf("seed bulk user: %w", err)
		}
	}
	for _, np := range fzSeedPosts {
		if _, err := st.CreatePost(ctx, fzAda, np, nil); err != nil {
			return fmt.Errorf("seed post: %w", err)
		}
	}
	fx.baseline, err = fx.snapshotErr()
	return err
}

// fzClock is the store's clock: a second further on every reading, from the same instant in every
// fresh store. Real time would make every input meet other timestamps, which protojson writes with
// 0, 3, 6 or 9 digits of fraction: coverage that comes and goes by chance, which misleads the
// fuzzer and keeps its minimizer busy for the whole run.
type fzClock struct{ ticks int }

func (c *fzClock) now() time.Time {
	c.ticks++
	return time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC).Add(time.Duration(c.ticks) * time.Second)
}

// fzSnapshot is everything the REST routes can change in users and posts, read through the store.
type fzSnapshot struct {
	Users []store.User
	Posts map[int32][]store.Post
}

func (fx *fzFixture) snapshotErr() (fzSnapshot, error) {
	ctx := context.Background()
	page, err := fx.st.Store.ListUsers(ctx, store.UserQuery{Limit: 1000})
	if err != nil {
		return fzSnapshot{}, fmt.Errorf("snapshot users: %w", err)
	}
	if page.Total != int64(len(page.Items)) {
		return fzSnapshot{}, fmt.Errorf("snapshot: %d users counted, %d listed", page.Total, len(page.Items))
	}
	s := fzSnapshot{Users: page.Items, Posts: map[int32][]store.Post{}}
	for _, u := range page.Items {
		if fx.isBulk(u.ID) || u.ID != fzAda && !fx.allPosts && !fx.isNew(u.ID) {
			continue // users that no request of the target can post to
		}
		posts, err := fx.st.Store.ListPosts(ctx, u.ID, store.PostQuery{Limit: 1000})
		if err != nil {
			return fzSnapshot{}, fmt.Errorf("snapshot posts of %d: %w", u.ID, err)
		}
		if len(posts.Items) > 0 {
			s.Posts[u.ID] = posts.Items
		}
	}
	return s, nil
}

func (fx *fzFixture) isBulk(id int32) bool {
	return id > int32(len(fzSeedUsers)) && id <= int32(len(fzSeedUsers)+fx.bulk)
}

// isNew reports whether id is a user that was created after the store was seeded.
func (fx *fzFixture) isNew(id int32) bool { return id > int32(len(fzSeedUsers)+fx.bulk) }

// begin starts an input: if the input fails, the next one gets freshly seeded data, whatever the
// failure left behind (so that one failing seed does not fail every seed after it).
func (fx *fzFixture) begin(t *testing.T) {
	fx.st.writes = 0
	fx.log.take()
	watchdog := time.AfterFunc(fzHang, func() {
		stacks := make([]byte, 1<<20)
		stacks = stacks[:runtime.Stack(stacks, true)]
		// A panic here ends the process, which the fuzzer reports with the input: better than a
		// worker that waits for ever while the run says PASS.
		panic(fmt.Sprintf("an input has run for %v: the handler or the store hangs\n%s", fzHang, stacks))
	})
	t.Cleanup(func() {
		watchdog.Stop()
		if t.Failed() {
			if err := fx.seed(); err != nil {
				t.Error(err)
			}
		}
	})
}

func (fx *fzFixture) snapshot(t *testing.T) fzSnapshot {
	t.Helper()
	s, err := fx.snapshotErr()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// user returns the user with id in s.
func (s fzSnapshot) user(id int32) (store.User, bool) {
	i := slices.IndexFunc(s.Users, func(u store.User) bool { return u.ID == id })
	if i < 0 {
		return store.User{}, false
	}
	return s.Users[i], true
}

// changed lists the ids of the users that differ between s and after: added, removed, or with other
// fields or posts.
func (s fzSnapshot) changed(after fzSnapshot) []int32 {
	var ids []int32
	seen := map[int32]bool{}
	for _, snap := range []fzSnapshot{s, after} {
		for _, u := range snap.Users {
			if seen[u.ID] {
				continue
			}
			seen[u.ID] = true
			a, aok := s.user(u.ID)
			b, bok := after.user(u.ID)
			if aok != bok || !reflect.DeepEqual(a, b) || !reflect.DeepEqual(s.Posts[u.ID], after.Posts[u.ID]) {
				ids = append(ids, u.ID)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// fzLog collects what the handler logs at warning level or above: in this fixture every such record
// is a fault (a 500, a panic after the answer began, an idempotency key that could not be released).
type fzLog struct {
	mu      sync.Mutex
	records []string
}

func (l *fzLog) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelWarn }

func (l *fzLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.records = append(l.records, b.String())
	l.mu.Unlock()
	return nil
}

func (l *fzLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *fzLog) WithGroup(string) slog.Handler      { return l }

// take returns and forgets what was logged.
func (l *fzLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	records := l.records
	l.records = nil
	return records
}

// fzRequest is one request of a target: what it sends, and what it may answer besides 2xx and 4xx.
type fzRequest struct {
	method string
	target string // the request target as it stands in the request line: path and query
	header http.Header
	body   []byte
	// allow304 admits 304 Not Modified (a GET with If-None-Match).
	allow304 bool
}

// fzResponse is what the handler answered.
type fzResponse struct {
	req    fzRequest
	status int
	header http.Header
	body   []byte
}

func (r *fzResponse) ok() bool { return r.status >= 200 && r.status < 300 }

// String describes the exchange for a failure message, with every byte of the input visible.
func (r *fzResponse) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q", r.req.method, r.req.target)
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range r.req.header {
			if !yield(k) {
				return
			}
		}
	}) {
		if name != http.CanonicalHeaderKey(APIKeyHeader) {
			fmt.Fprintf(&b, "\n  %s: %q", name, r.req.header[name])
		}
	}
	if r.req.body != nil {
		fmt.Fprintf(&b, "\n  body %q", r.req.body)
	}
	fmt.Fprintf(&b, "\n-> %d %q", r.status, r.body)
	return b.String()
}

// fzWriteHeader is the header of a write: the API key and, for a body, its Content-Type.
func fzWriteHeader(contentType string) http.Header {
	h := http.Header{}
	h.Set(APIKeyHeader, fzAPIKey)
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	return h
}

// fzValidTarget reports whether a request line could carry target as the net/http server reads it:
// no space (it would end the target), and a URI that url.ParseRequestURI accepts (no control
// characters, a path that starts with /).
func fzValidTarget(target string) (*url.URL, bool) {
	if strings.ContainsAny(target, " ") {
		return nil, false
	}
	u, err := url.ParseRequestURI(target)
	return u, err == nil
}

// serve sends req through the handler in-process. ok is false when no HTTP/1.1 client could send
// req.target, and nothing was sent.
func (fx *fzFixture) serve(t *testing.T, req fzRequest) (res *fzResponse, ok bool) {
	t.Helper()
	u, ok := fzValidTarget(req.target)
	if !ok {
		return nil, false
	}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	r := httptest.NewRequest(req.method, "/", body)
	r.URL, r.RequestURI = u, req.target
	for name, values := range req.header {
		r.Header[http.CanonicalHeaderKey(name)] = slices.Clone(values)
	}
	rec := httptest.NewRecorder()
	fx.h.ServeHTTP(rec, r) // a panic that escapes the final error handler fails the input here
	return &fzResponse{req: req, status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}, true
}

// check holds res to the invariants that every answer keeps, whatever the route.
func (fx *fzFixture) check(t *testing.T, res *fzResponse) {
	t.Helper()
	if records := fx.log.take(); len(records) > 0 {
		t.Fatalf("the handler logged a fault:\n%s\n%s", strings.Join(records, "\n"), res)
	}
	switch s := res.status; {
	case s >= 500:
		t.Fatalf("status %d: a fault or a panic (the final error handler answers 500):\n%s", s, res)
	case s == http.StatusNotModified && res.req.allow304:
		if len(res.body) > 0 {
			t.Fatalf("304 with a body:\n%s", res)
		}
	case fzTolerateCleanPathRedirects && fzIsCleanPathRedirect(res):
		// Known finding, see fzTolerateCleanPathRedirects.
	case s < 200 || s >= 300 && s < 400:
		t.Fatalf("status %d: only 2xx and 4xx are answers here:\n%s", s, res)
	case s >= 400:
		message, err := fzCheckErrorBody(res.body)
		if err != nil {
			t.Fatalf("a %d body is not the REST error body: %v\n%s", s, err, res)
		}
		if message == apierror.InternalMessage {
			t.Fatalf("a %d answer with the message of a fault:\n%s", s, res)
		}
		fzCheckJSONType(t, res)
	case s == http.StatusNoContent:
		if len(res.body) > 0 {
			t.Fatalf("204 with a body:\n%s", res)
		}
	default:
		if !json.Valid(res.body) {
			t.Fatalf("a %d body is not JSON:\n%s", s, res)
		}
		fzCheckJSONType(t, res)
	}
	for name, values := range res.header {
		for _, v := range values {
			if strings.ContainsAny(v, "\r\n\x00") {
				t.Fatalf("response header %s holds a line break or NUL: %q\n%s", name, v, res)
			}
		}
	}
}

// fzTolerateCleanPathRedirects admits one known deviation from the rule of docs/API.md#the-routes that a path no
// route serves is 404, so that the fuzz runs can look for others: http.ServeMux answers a request whose path is not canonical
// ("/users/.", "/users/..", "/users/1/../2", "/users/1//posts") with a redirect to the cleaned path
// and an HTML body, where the contract has 404 {"error": ...} for a path that no route serves.
// Set it to false to hold the service to the contract there too (FuzzUserID then fails at once on
// the segment ".").
const fzTolerateCleanPathRedirects = false

// fzIsCleanPathRedirect reports whether res is http.ServeMux's redirect of a non-canonical path
// (cleaned as the mux does: path.Clean, keeping a trailing slash) to its canonical form.
func fzIsCleanPathRedirect(res *fzResponse) bool {
	if res.status != http.StatusMovedPermanently && res.status != http.StatusTemporaryRedirect && res.status != http.StatusPermanentRedirect {
		return false
	}
	u, ok := fzValidTarget(res.req.target)
	if !ok {
		return false
	}
	// Location is not compared with the cleaned path: the mux escapes it twice in places
	// ("/users//\"" redirects to "/users/%2522").
	return fzCleanPath(u.Path) != u.Path && res.header.Get("Location") != ""
}

// fzCleanPath cleans an (unescaped) path as http.ServeMux does before it routes: path.Clean,
// keeping a trailing slash.
func fzCleanPath(p string) string {
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean
}

func fzCheckJSONType(t *testing.T, res *fzResponse) {
	t.Helper()
	if ct := res.header.Get("Content-Type"); ct != restbody.MediaTypeJSON {
		t.Fatalf("Content-Type %q, want %s:\n%s", ct, restbody.MediaTypeJSON, res)
	}
}

// fzCheckErrorBody is apitest.CheckErrorBody's message and verdict.
func fzCheckErrorBody(body []byte) (message string, err error) {
	message, _, err = apitest.CheckErrorBody(body)
	return message, err
}

// settle compares the store with the seeded snapshot. A 4xx (or 304) must have changed nothing; a
// 2xx may change only what allowed accepts (nil: nothing at all). A store that changed is seeded
// again for the next input.
func (fx *fzFixture) settle(t *testing.T, res *fzResponse, allowed func(before, after fzSnapshot) error) {
	t.Helper()
	if len(fx.st.reserved) > 0 {
		t.Fatalf("idempotency keys left reserved (neither completed nor given back): %v\n%s", slices.Collect(maps.Keys(fx.st.reserved)), res)
	}
	if fx.st.writes == 0 {
		return // no writing method was called: nothing can have changed
	}
	fx.st.writes = 0
	after := fx.snapshot(t)
	if reflect.DeepEqual(after, fx.baseline) {
		return
	}
	switch {
	case !res.ok():
		t.Fatalf("a %d answer changed the store (users %v):\n%s", res.status, fx.baseline.changed(after), res)
	case allowed == nil:
		t.Fatalf("this request must not change the store, yet users %v changed:\n%s", fx.baseline.changed(after), res)
	}
	if err := allowed(fx.baseline, after); err != nil {
		t.Fatalf("%v\n%s", err, res)
	}
	if fx.restore && fx.putBack(after) {
		return
	}
	if err := fx.seed(); err != nil {
		t.Fatal(err)
	}
}

// fzRestoreLimit bounds how far a restored store may drift from a fresh one: at most this many posts
// of a user, and versions below it, so that ids and etags keep as many digits as they had.
const fzRestoreLimit = 50

// putBack undoes the changes from the baseline to after that a restore can undo, takes the result
// as the new baseline, and reports whether it did. It cannot undo a deleted seed user (the id is
// never handed out again) or a kept idempotency key (only a fresh store forgets it).
func (fx *fzFixture) putBack(after fzSnapshot) bool {
	if fx.st.kept {
		return false
	}
	ctx := context.Background()
	for _, id := range fx.baseline.changed(after) {
		was, seeded := fx.baseline.user(id)
		now, exists := after.user(id)
		switch {
		case !seeded:
			if err := fx.st.Store.DeleteUser(ctx, id, nil); err != nil {
				return false
			}
		case !exists || len(after.Posts[id]) > fzRestoreLimit || now.Version >= fzRestoreLimit:
			return false
		case now.Name != was.Name || now.Role != was.Role:
			if _, err := fx.st.Store.UpdateUser(ctx, id, store.UserChanges{Name: &was.Name, Role: &was.Role}, nil); err != nil {
				return false
			}
		}
	}
	restored, err := fx.snapshotErr()
	if err != nil || len(restored.Users) != len(fx.baseline.Users) {
		return false
	}
	for i, u := range restored.Users {
		was := fx.baseline.Users[i]
		if u.ID != was.ID || u.Name != was.Name || u.Role != was.Role || u.CreatedAt != was.CreatedAt ||
			!slices.Equal(restored.Posts[u.ID][:min(len(restored.Posts[u.ID]), len(fx.baseline.Posts[u.ID]))], fx.baseline.Posts[u.ID]) {
			return false
		}
	}
	fx.baseline = restored
	return true
}

// fzStore is the store under the handler: the real store, with a count of the calls of methods
// that may write and the idempotency keys that are reserved and neither completed nor released.
// The fixture calls the real store directly (fzStore.Store) to seed it and to take snapshots.
type fzStore struct {
	store.Store
	writes   int
	reserved map[store.Reservation]bool
	kept     bool // an idempotency key's answer has been kept since the store was seeded
}

func (s *fzStore) CreateUser(ctx context.Context, u store.NewUser, done *store.Completion[store.User]) (store.User, error) {
	s.writes++
	created, err := s.Store.CreateUser(ctx, u, done)
	if err == nil && done != nil {
		delete(s.reserved, done.Reservation)
		s.kept = true
	}
	return created, err
}

func (s *fzStore) UpdateUser(ctx context.Context, id int32, changes store.UserChanges, ifVersion store.IfVersion) (store.User, error) {
	s.writes++
	return s.Store.UpdateUser(ctx, id, changes, ifVersion)
}

func (s *fzStore) DeleteUser(ctx context.Context, id int32, ifVersion store.IfVersion) error {
	s.writes++
	return s.Store.DeleteUser(ctx, id, ifVersion)
}

func (s *fzStore) CreatePost(ctx context.Context, userID int32, p store.NewPost, done *store.Completion[store.Post]) (store.Post, error) {
	s.writes++
	created, err := s.Store.CreatePost(ctx, userID, p, done)
	if err == nil && done != nil {
		delete(s.reserved, done.Reservation)
		s.kept = true
	}
	return created, err
}

func (s *fzStore) BeginRequest(ctx context.Context, key store.RequestKey, hash []byte) (store.Reservation, *store.Answer, error) {
	s.writes++
	r, answer, err := s.Store.BeginRequest(ctx, key, hash)
	if err == nil && answer == nil {
		if s.reserved == nil {
			s.reserved = map[store.Reservation]bool{}
		}
		s.reserved[r] = true
	}
	return r, answer, err
}

func (s *fzStore) AbandonRequest(ctx context.Context, r store.Reservation) error {
	s.writes++
	err := s.Store.AbandonRequest(ctx, r)
	if err == nil {
		delete(s.reserved, r)
	}
	return err
}

func (s *fzStore) DeleteExpiredRequests(ctx context.Context, limit int) (int, error) {
	s.writes++
	return s.Store.DeleteExpiredRequests(ctx, limit)
}

// fzOnlyChanged allows a change of the users ids and no other.
func fzOnlyChanged(ids ...int32) func(before, after fzSnapshot) error {
	return func(before, after fzSnapshot) error {
		if changed := before.changed(after); !slices.Equal(changed, ids) {
			return fmt.Errorf("users %v changed; only %v may", changed, ids)
		}
		return nil
	}
}

// fzDecodeUser reads a user answer strictly, as a client generated from the proto would.
func fzDecodeUser(t *testing.T, res *fzResponse) *usersv1.User {
	t.Helper()
	u := &usersv1.User{}
	if err := protojson.Unmarshal(res.body, u); err != nil {
		t.Fatalf("the answer is not a User: %v\n%s", err, res)
	}
	if u.GetId() <= 0 || u.GetEtag() == "" || res.header.Get("ETag") != u.GetEtag() {
		t.Fatalf("user answer without id or etag, or with an ETag header %q that differs:\n%s", res.header.Get("ETag"), res)
	}
	return u
}

// checkStoredUser checks that a user answer is what the store now holds (fields and version),
// and that GET /users/{id} answers it byte for byte.
func (fx *fzFixture) checkStoredUser(t *testing.T, res *fzResponse, answered *usersv1.User) {
	t.Helper()
	stored, ok := fx.snapshot(t).user(answered.GetId())
	if !ok {
		t.Fatalf("user %d was answered but is not stored:\n%s", answered.GetId(), res)
	}
	if stored.Name != answered.GetName() || stored.Role != answered.GetRole() || users.ETag(stored) != answered.GetEtag() {
		t.Fatalf("answered %v, stored %+v:\n%s", answered, stored, res)
	}
	get, _ := fx.serve(t, fzRequest{method: http.MethodGet, target: "/users/" + strconv.Itoa(int(answered.GetId()))})
	fx.check(t, get)
	if get.status != http.StatusOK || !bytes.Equal(get.body, res.body) {
		t.Fatalf("GET after the write answers differently:\n%s\nwrite:\n%s", get, res)
	}
}
