package replicas_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/store/storetest"
)

// pooledWriters is how many clients of TestAWriteAnswersAtItsDeadlineThroughAPausedPooler create
// users without pause, over REST and over Connect, when the pooler is paused.
const pooledWriters = 9

// TestAWriteAnswersAtItsDeadlineThroughAPausedPooler pauses PgBouncer (its admin console's PAUSE,
// what an operator does around a server's restart) while clients create users with idempotency
// keys as fast as they can, on a usersd whose request timeout is 2 s. The pooler holds the
// statements that come after PAUSE, whichever step of a create they are: the key's reservation,
// the insert, or the read of the write's position for its Consistency-Token. Each create in
// flight must still be answered at its deadline (504 on REST, deadline_exceeded on RPC, or 201
// if it had committed), long before the pause ends, not when the pooler resumes. Then a retry of
// each create with its key makes exactly one user for each key: none lost, none made twice.
func TestAWriteAnswersAtItsDeadlineThroughAPausedPooler(t *testing.T) {
	t.Parallel() // bounds far from what a busy machine does: see startProcess
	const (
		requestTimeout = 2 * time.Second
		// Every writer answered before the pause ends shows that the deadline, not the pooler's
		// resume, answered them.
		pause = 30 * time.Second
		// heldAnswerBound bounds each answer that the pause held: at its deadline, with room for a
		// busy machine's scheduling, and far below the pause, so that an answer that waited for
		// anything but the deadline cannot pass.
		heldAnswerBound = 5 * requestTimeout
	)
	pooler := storetest.StartPgBouncer(t)
	pooled, direct := pooler.Database(t)
	_, s, _ := startProcess(t, pooled, "-db-direct", direct, "-request-timeout", requestTimeout.String())
	rpc := s.RPCClient(apitest.RPCProtocols[0], apitest.Key)

	type answer struct {
		key     string
		name    string
		took    time.Duration
		created bool
		got     string // the status and body, or the code
		err     error
	}
	var mu sync.Mutex
	var answers []answer
	stopped := make(chan struct{}, pooledWriters)
	for w := range pooledWriters {
		go func() {
			defer func() { stopped <- struct{}{} }()
			// Each writer creates until a create is not answered 201: the one that the pause held.
			for n := 0; ; n++ {
				key, name := fmt.Sprintf("w%d-%d", w, n), fmt.Sprintf("writer %d user %d", w, n)
				began := time.Now()
				a := answer{key: key, name: name}
				if w%3 == 2 { // one writer in three over RPC
					_, a.err = rpc.CreateUser(context.Background(), &usersv1.CreateUserRequest{User: &usersv1.User{Name: name}, RequestId: key})
					a.created, a.got = a.err == nil, connect.CodeOf(a.err).String()
				} else {
					var status int
					var body string
					status, body, a.err = createWithKey(context.Background(), s.BaseURL, name, key)
					a.created, a.got = status == http.StatusCreated, strconv.Itoa(status)+" "+body
				}
				a.took = time.Since(began)
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
				if !a.created {
					return
				}
			}
		}()
	}
	time.Sleep(time.Second) // the writers under way
	pooler.Admin(t, "PAUSE")
	pausedAt := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			pooler.Admin(t, "RESUME")
		}
	}
	defer resume()
	for range pooledWriters {
		select {
		case <-stopped:
		case <-time.After(pause - time.Since(pausedAt)):
			resume() // a create still held: let it go, so that the test ends
			<-stopped
		}
	}
	stillPaused := !resumed
	resume()

	mu.Lock()
	defer mu.Unlock()
	var longest time.Duration
	refused := 0
	for _, a := range answers {
		longest = max(longest, a.took)
		switch {
		case a.created:
		case a.got == "deadline_exceeded" || strings.HasPrefix(a.got, "504 {\"error\":"):
			refused++
			if a.took > heldAnswerBound {
				t.Errorf("create %s was answered %s after %v, want at its deadline (%v), at most %v", a.key, a.got, a.took.Round(time.Millisecond), requestTimeout, heldAnswerBound)
			}
		default:
			t.Errorf("create %s through the paused pooler: %s (%v), want 201, 504 or deadline_exceeded", a.key, a.got, a.err)
		}
	}
	if !stillPaused {
		t.Errorf("the writers were still waiting when the pause ended, %v after it began", pause)
	}
	if refused != pooledWriters {
		t.Fatalf("%d creates were refused at their deadline, want one for each of the %d writers", refused, pooledWriters)
	}
	t.Logf("%d creates, %d of them held by the paused pooler and answered at their deadline; the longest answer took %v",
		len(answers), refused, longest.Round(time.Millisecond))

	// Each retry with its key makes the user once. A key whose reservation is still being given
	// back is refused as in progress (409) meanwhile, and a connection that the pause left broken
	// answers 503: both retried, as a client would.
	retries := 0
	for _, a := range answers {
		if a.created {
			continue
		}
		// The same request: a create that did commit before its deadline passed is answered again.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			status, body, err := createWithKey(t.Context(), s.BaseURL, a.name, a.key)
			if err == nil && status == http.StatusCreated {
				break
			}
			if err != nil || status != http.StatusConflict && status != http.StatusServiceUnavailable || time.Now().After(deadline) {
				t.Fatalf("the retry of create %s after the pause: %d %s %v", a.key, status, body, err)
			}
			retries++
		}
	}
	t.Logf("the %d creates refused at their deadline were made again with %d retries more", refused, retries)
	if n := apitest.UserCount(t, s.BaseURL); n != strconv.Itoa(len(answers)) {
		t.Errorf("%s users after the pause and the retries, want %d: one for each key", n, len(answers))
	}
}

// createWithKey creates a user over REST with the test key and the idempotency key key, and
// returns the status and the body; it never fails the test, so that a goroutine may call it.
func createWithKey(ctx context.Context, base, name, key string) (int, string, error) {
	r, err := http.NewRequestWithContext(ctx, "POST", base+"/users", strings.NewReader(fmt.Sprintf(`{"name":%q}`, name)))
	if err != nil {
		return 0, "", err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("x-api-key", apitest.Key)
	r.Header.Set("Idempotency-Key", key)
	res, err := apitest.HTTP1Client.Do(r)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, "", errors.Join(fmt.Errorf("read the answer of %d", res.StatusCode), err)
	}
	return res.StatusCode, string(body), nil
}
