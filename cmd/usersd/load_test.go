package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/internal/apitest"
)

// loadClient is one way of reaching the service that a load run mixes: REST over HTTP/1.1 or h2c,
// and the generated client over Connect or gRPC. Each call reports whether the service acknowledged
// it, and a fault when the answer was a server error (5xx, or an RPC code that stands for one).
type loadClient interface {
	create(ctx context.Context, name string) (id int32, ok bool, fault error)
	get(ctx context.Context, id int32) (name string, found bool, fault error)
	list(ctx context.Context) (fault error)
	setRole(ctx context.Context, id int32, role string) (ok bool, fault error)
	remove(ctx context.Context, id int32) (ok bool, fault error)
}

// loadClients returns one client of each kind for s, named.
func loadClients(t *testing.T, s *testServer) map[string]loadClient {
	return map[string]loadClient{
		"REST HTTP/1.1":  restLoad{s.BaseURL, apitest.HTTP1Client},
		"REST h2c":       restLoad{s.BaseURL, apitest.H2CClient},
		"Connect binary": rpcLoad{s.RPCClient(apitest.RPCProtocolNamed(t, "Connect binary"), apitest.Key)},
		"gRPC":           rpcLoad{s.RPCClient(apitest.RPCProtocolNamed(t, "gRPC"), apitest.Key)},
	}
}

// serverError is an answer that was a server error, as opposed to a request that got no answer.
type serverError struct{ message string }

func (e *serverError) Error() string { return e.message }

type restLoad struct {
	baseURL string
	client  *http.Client
}

// send makes one REST request and returns its status and body; a status of 500 or more is a fault.
func (c restLoad) send(ctx context.Context, method, path, body string) (int, []byte, error) {
	var reader io.Reader
	if body != "" {
		reader = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, reader)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("x-api-key", apitest.Key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode >= 500 {
		err = &serverError{fmt.Sprintf("%s %s: %d %s", method, path, res.StatusCode, b)}
	}
	return res.StatusCode, b, err
}

func (c restLoad) create(ctx context.Context, name string) (int32, bool, error) {
	status, body, err := c.send(ctx, "POST", "/users", fmt.Sprintf(`{"name":%q}`, name))
	if err != nil || status != http.StatusCreated {
		return 0, false, err
	}
	var id int32
	_, err = fmt.Sscanf(string(body), `{"id":%d`, &id)
	return id, err == nil, err
}

func (c restLoad) get(ctx context.Context, id int32) (string, bool, error) {
	status, body, err := c.send(ctx, "GET", fmt.Sprintf("/users/%d", id), "")
	if err != nil || status != http.StatusOK {
		return "", false, err
	}
	_, after, _ := strings.Cut(string(body), `"name":"`)
	name, _, _ := strings.Cut(after, `"`)
	return name, true, nil
}

func (c restLoad) list(ctx context.Context) error {
	_, _, err := c.send(ctx, "GET", "/users?sort=-createdAt&limit=20", "")
	return err
}

func (c restLoad) setRole(ctx context.Context, id int32, role string) (bool, error) {
	status, _, err := c.send(ctx, "PATCH", fmt.Sprintf("/users/%d", id), fmt.Sprintf(`{"role":%q}`, role))
	return err == nil && status == http.StatusOK, err
}

func (c restLoad) remove(ctx context.Context, id int32) (bool, error) {
	status, _, err := c.send(ctx, "DELETE", fmt.Sprintf("/users/%d", id), "")
	return err == nil && status == http.StatusNoContent, err
}

type rpcLoad struct{ client usersv1connect.UsersClient }

// rpcFault returns err if its code stands for a server error, the RPC side of a 5xx.
func rpcFault(err error) error {
	switch connect.CodeOf(err) {
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss, connect.CodeUnavailable, connect.CodeDeadlineExceeded:
		return err
	}
	return nil
}

func (c rpcLoad) create(ctx context.Context, name string) (int32, bool, error) {
	res, err := c.client.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: name}})
	return res.GetUser().GetId(), err == nil, rpcFault(err)
}

func (c rpcLoad) get(ctx context.Context, id int32) (string, bool, error) {
	u, err := c.client.GetUser(ctx, &usersv1.GetUserRequest{Id: id})
	return u.GetName(), err == nil, rpcFault(err)
}

func (c rpcLoad) list(ctx context.Context) error {
	_, err := c.client.ListUsers(ctx, &usersv1.ListUsersRequest{Sort: "-createdAt"})
	return rpcFault(err)
}

func (c rpcLoad) setRole(ctx context.Context, id int32, role string) (bool, error) {
	_, err := c.client.ReplaceUser(ctx, &usersv1.ReplaceUserRequest{Id: id, User: &usersv1.User{Name: fmt.Sprint("replaced ", id), Role: role}})
	return err == nil, rpcFault(err)
}

func (c rpcLoad) remove(ctx context.Context, id int32) (bool, error) {
	_, err := c.client.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: id})
	return err == nil, rpcFault(err)
}

// loadLedger keeps what a load run was told: every acknowledged create (with the name it must
// have) and delete, and every fault.
type loadLedger struct {
	mu      sync.Mutex
	names   map[int32]string // acknowledged and not deleted: the name the user must have
	deleted map[int32]bool   // acknowledged deletes
	// inDoubt are users whose last write got no answer (the run ended while it was under way): the
	// service may or may not have applied it, so neither outcome is wrong.
	inDoubt  map[int32]bool
	faults   []error
	requests atomic.Int64
}

func newLoadLedger() *loadLedger {
	return &loadLedger{names: map[int32]string{}, deleted: map[int32]bool{}, inDoubt: map[int32]bool{}}
}

func (l *loadLedger) fault(who string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = append(l.faults, fmt.Errorf("%s: %w", who, err))
}

// settle records the outcome of a write to user id: applied (acknowledged), in doubt (no answer,
// because the run ended while it was under way or it failed, which check counts as a fault), or
// refused although the user is the worker's own, a fault.
func (l *loadLedger) settle(who string, id int32, acknowledged bool, err error, ctx context.Context, applied func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case acknowledged:
		applied()
	case err != nil || ctx.Err() != nil:
		l.inDoubt[id] = true
	default:
		l.faults = append(l.faults, &serverError{fmt.Sprintf("%s: a write to its own user %d was refused", who, id)})
	}
}

// runLoadWorker sends a mix of reads and writes through c until ctx ends, recording what the
// service acknowledged. A transport error after ctx ended is the run stopping, not a fault.
func runLoadWorker(ctx context.Context, who string, c loadClient, ledger *loadLedger) {
	rng := rand.New(rand.NewPCG(uint64(len(who)), uint64(time.Now().UnixNano())))
	var own []int32
	check := func(err error) bool {
		ledger.requests.Add(1)
		if err != nil && ctx.Err() == nil {
			ledger.fault(who, err)
		}
		return err == nil
	}
	for n := 0; ctx.Err() == nil; n++ {
		switch op := rng.IntN(10); {
		case op < 3 || len(own) == 0:
			name := fmt.Sprintf("%s %d", who, n)
			id, ok, err := c.create(ctx, name)
			if check(err) && ok {
				own = append(own, id)
				ledger.mu.Lock()
				ledger.names[id] = name
				ledger.mu.Unlock()
			}
		case op < 6:
			id := own[rng.IntN(len(own))]
			name, found, err := c.get(ctx, id)
			ledger.mu.Lock()
			want := ledger.names[id]
			ledger.mu.Unlock()
			if check(err) && ctx.Err() == nil && (!found || name != want) {
				ledger.fault(who, &serverError{fmt.Sprintf("user %d reads as %q (found %v), want %q", id, name, found, want)})
			}
		case op < 8:
			check(c.list(ctx))
		case op < 9:
			i := rng.IntN(len(own))
			ok, err := c.setRole(ctx, own[i], fmt.Sprint("role ", n))
			check(err)
			ledger.settle(who, own[i], ok, err, ctx, func() {
				if _, isRPC := c.(rpcLoad); isRPC { // ReplaceUser also sets the name
					ledger.names[own[i]] = fmt.Sprint("replaced ", own[i])
				}
			})
		default:
			i := rng.IntN(len(own))
			id := own[i]
			ok, err := c.remove(ctx, id)
			check(err)
			ledger.settle(who, id, ok, err, ctx, func() {
				own = append(own[:i], own[i+1:]...)
				delete(ledger.names, id)
				ledger.deleted[id] = true
			})
		}
	}
}

// verifyLedger checks that the service holds every acknowledged create under its last acknowledged
// name and none of the acknowledged deletes.
func verifyLedger(t *testing.T, s *testServer, ledger *loadLedger) {
	t.Helper()
	reader := restLoad{s.BaseURL, apitest.HTTP1Client}
	for id, want := range ledger.names {
		if ledger.inDoubt[id] {
			continue
		}
		if name, found, err := reader.get(t.Context(), id); err != nil || !found || name != want {
			t.Errorf("acknowledged user %d: found %v, name %q, %v; want %q", id, found, name, err, want)
		}
	}
	for id := range ledger.deleted {
		if _, found, err := reader.get(t.Context(), id); err != nil || found {
			t.Errorf("acknowledged delete of user %d: still found (%v)", id, err)
		}
	}
}

// TestLoadWithoutLoss runs 64 concurrent clients mixing reads and writes over REST (HTTP/1.1 and
// h2c), Connect and gRPC for a bounded time: no answer may be a server error, and afterwards every
// acknowledged create is present and every acknowledged delete is gone.
func TestLoadWithoutLoss(t *testing.T) {
	s := startServer(t)
	const clients, duration = 64, 5 * time.Second
	// The run ends by cancelling, not by a deadline: a deadline would travel with each RPC
	// (grpc-timeout, connect-timeout-ms, rounded down to the millisecond), so the service could
	// rightly answer deadline_exceeded a moment before the client's own context expired, and
	// that answer would read as a fault.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	time.AfterFunc(duration, cancel)
	ledger := newLoadLedger()
	kinds := loadClients(t, s)
	names := make([]string, 0, len(kinds))
	for name := range kinds {
		names = append(names, name)
	}
	var wg sync.WaitGroup
	for i := range clients {
		kind := names[i%len(names)]
		wg.Go(func() { runLoadWorker(ctx, fmt.Sprintf("%s #%d", kind, i), kinds[kind], ledger) })
	}
	wg.Wait()
	if len(ledger.faults) > 0 {
		t.Fatalf("%d server errors in the load run, first: %v", len(ledger.faults), errors.Join(ledger.faults[:min(5, len(ledger.faults))]...))
	}
	verifyLedger(t, s, ledger)
	t.Logf("%d requests from %d clients in %s (%.0f/s); %d users kept, %d deleted",
		ledger.requests.Load(), clients, duration, float64(ledger.requests.Load())/duration.Seconds(), len(ledger.names), len(ledger.deleted))
	if len(ledger.names) == 0 || len(ledger.deleted) == 0 {
		t.Fatal("the run acknowledged no create or no delete: it tested nothing")
	}
}
