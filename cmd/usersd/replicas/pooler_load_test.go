package replicas_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/internal/apitest"
	"usersd/store/storetest"
)

// mixedRequests is how many requests TestTenThousandMixedRequestsThroughPgBouncer makes.
const mixedRequests = 10_000

// TestTenThousandMixedRequestsThroughPgBouncer sends 10,000 requests of every kind (creates with
// and without a repeated idempotency key, reads, conditional updates, deletes, lists, posts) from
// twelve clients to three replicas behind PgBouncer in transaction mode, over REST and every RPC
// protocol. Each client works on users of its own, so that it knows what every answer must be: no
// answer may be a 5xx, every one must be the one expected, and the totals must come out exact.
func TestTenThousandMixedRequestsThroughPgBouncer(t *testing.T) {
	t.Parallel() // checks what was kept, not how fast: see startProcess
	pooled, direct := storetest.StartPgBouncer(t).Database(t)
	var replicas []*testServer
	for range 3 {
		_, s, _ := startProcess(t, pooled, "-db-direct", direct)
		replicas = append(replicas, s)
	}
	var sent atomic.Int64
	var workers sync.WaitGroup
	clients := make([]*mixedClient, 12)
	failures := make(chan error, len(clients))
	began := time.Now()
	for i := range clients {
		s := replicas[i%len(replicas)]
		p := apitest.RPCProtocols[i%len(apitest.RPCProtocols)]
		clients[i] = &mixedClient{id: i, s: s, rpc: s.RPCClient(p, apitest.Key), protocol: p.Name,
			users: map[int32]*mixedUser{}, rand: rand.New(rand.NewPCG(uint64(i), 25))}
		workers.Go(func() {
			for sent.Add(1) <= mixedRequests {
				if err := clients[i].step(t.Context()); err != nil {
					failures <- fmt.Errorf("client %d (%s, replica %d): %w", i, p.Name, i%len(replicas), err)
					return
				}
			}
		})
	}
	workers.Wait()
	took := time.Since(began)
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	// The totals: every replica counts exactly the users the clients left, and each user holds
	// what its client last wrote and as many posts as it added.
	alive, kinds := 0, map[string]int{}
	for _, c := range clients {
		alive += len(c.users)
		for k, n := range c.kinds {
			kinds[k] += n
		}
	}
	for r, s := range replicas {
		if n := apitest.UserCount(t, s.BaseURL); n != strconv.Itoa(alive) {
			t.Errorf("replica %d counts %s users; the clients left %d", r, n, alive)
		}
	}
	for _, c := range clients {
		for id, u := range c.users {
			got, err := c.rpc.GetUser(t.Context(), &usersv1.GetUserRequest{Id: id})
			apitest.RPCMust(t, "GetUser", err)
			posts, err := c.rpc.ListUserPosts(t.Context(), &usersv1.ListUserPostsRequest{UserId: id})
			apitest.RPCMust(t, "ListUserPosts", err)
			if got.GetName() != u.name || got.GetEtag() != u.etag || int(posts.GetTotalCount()) != u.posts {
				t.Fatalf("user %d is %q %s with %d posts; its client last wrote %q %s and added %d posts",
					id, got.GetName(), got.GetEtag(), posts.GetTotalCount(), u.name, u.etag, u.posts)
			}
		}
	}
	t.Logf("%d requests from %d clients to 3 replicas through PgBouncer in %v (%.0f req/s), none a 5xx; by kind %v; %d users left",
		mixedRequests, len(clients), took.Round(time.Millisecond), mixedRequests/took.Seconds(), kinds, alive)
}

// mixedClient makes requests on users of its own, alternating REST and its RPC protocol, and
// checks each answer against what it knows.
type mixedClient struct {
	id       int
	s        *testServer
	rpc      usersv1connect.UsersClient
	protocol string
	users    map[int32]*mixedUser
	rand     *rand.Rand
	kinds    map[string]int
	n        int
}

type mixedUser struct {
	name, etag string
	posts      int
}

// step makes one request, chosen at random, and checks its answer.
func (c *mixedClient) step(ctx context.Context) error {
	if c.kinds == nil {
		c.kinds = map[string]int{}
	}
	c.n++
	rest := c.rand.IntN(2) == 0
	id, u := c.anyUser()
	kind := "create"
	switch r := c.rand.IntN(100); {
	case u == nil || r < 20:
	case r < 45:
		kind = "get"
	case r < 60:
		kind = "update"
	case r < 68:
		kind = "delete"
	case r < 80:
		kind = "list"
	case r < 92:
		kind = "post"
	default:
		kind = "list posts"
	}
	c.kinds[kind]++
	var err error
	switch kind {
	case "create":
		err = c.create(ctx, rest)
	case "get":
		err = c.get(ctx, rest, id, u)
	case "update":
		err = c.update(ctx, rest, id, u)
	case "delete":
		err = c.delete(ctx, rest, id)
	case "list":
		err = c.list(ctx, rest)
	case "post":
		err = c.post(ctx, rest, id, u)
	case "list posts":
		err = c.listPosts(ctx, rest, id, u)
	}
	if err != nil {
		return fmt.Errorf("%s over %s: %w", kind, map[bool]string{true: "REST", false: c.protocol}[rest], err)
	}
	return nil
}

// anyUser returns one of the client's users, or nil if it has none.
func (c *mixedClient) anyUser() (int32, *mixedUser) {
	for id, u := range c.users {
		return id, u
	}
	return 0, nil
}

func (c *mixedClient) create(ctx context.Context, rest bool) error {
	name := fmt.Sprintf("c%d n%d", c.id, c.n)
	key := fmt.Sprintf("c%d-%d", c.id, c.n)
	attempts := 1
	if c.rand.IntN(10) == 0 {
		attempts = 2 // a retry of the same create must answer it again
	}
	var created *usersv1.User
	for attempt := range attempts {
		var user *usersv1.User
		if rest {
			var body struct {
				ID   int32
				Name string
				Etag string
			}
			if err := writeJSONWithKey(c.s, "POST", "/users", key, fmt.Sprintf(`{"name":%q}`, name), http.StatusCreated, &body); err != nil {
				return err
			}
			user = &usersv1.User{Id: body.ID, Name: body.Name, Etag: body.Etag}
		} else {
			res, err := c.rpc.CreateUser(ctx, &usersv1.CreateUserRequest{User: &usersv1.User{Name: name}, RequestId: key})
			if err != nil {
				return err
			}
			user = res.GetUser()
		}
		if attempt > 0 && (user.GetId() != created.GetId() || user.GetEtag() != created.GetEtag()) {
			return fmt.Errorf("the repeat of key %s answered user %d %s, the first %d %s", key, user.GetId(), user.GetEtag(), created.GetId(), created.GetEtag())
		}
		created = user
	}
	c.users[created.GetId()] = &mixedUser{name: name, etag: created.GetEtag()}
	return nil
}

func (c *mixedClient) get(ctx context.Context, rest bool, id int32, u *mixedUser) error {
	var name, etag string
	if rest {
		var body struct{ Name, Etag string }
		if err := getJSON(c.s, fmt.Sprintf("/users/%d", id), http.StatusOK, &body); err != nil {
			return err
		}
		name, etag = body.Name, body.Etag
	} else {
		res, err := c.rpc.GetUser(ctx, &usersv1.GetUserRequest{Id: id})
		if err != nil {
			return err
		}
		name, etag = res.GetName(), res.GetEtag()
	}
	if name != u.name || etag != u.etag {
		return fmt.Errorf("user %d reads %q %s, want %q %s", id, name, etag, u.name, u.etag)
	}
	return nil
}

func (c *mixedClient) update(ctx context.Context, rest bool, id int32, u *mixedUser) error {
	name := fmt.Sprintf("c%d n%d renamed", c.id, c.n)
	var etag string
	if rest {
		var body struct{ Etag string }
		if err := writeJSONIfMatch(c.s, "PATCH", fmt.Sprintf("/users/%d", id), u.etag, fmt.Sprintf(`{"name":%q}`, name), &body); err != nil {
			return err
		}
		etag = body.Etag
	} else {
		res, err := c.rpc.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: id, User: &usersv1.User{Name: name},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"name"}}, Etag: u.etag})
		if err != nil {
			return err
		}
		etag = res.GetUser().GetEtag()
	}
	if etag == u.etag {
		return fmt.Errorf("user %d kept etag %s through an update", id, etag)
	}
	u.name, u.etag = name, etag
	return nil
}

func (c *mixedClient) delete(ctx context.Context, rest bool, id int32) error {
	if rest {
		if err := writeJSONWithKey(c.s, "DELETE", fmt.Sprintf("/users/%d", id), "", "", http.StatusNoContent, nil); err != nil {
			return err
		}
	} else if _, err := c.rpc.DeleteUser(ctx, &usersv1.DeleteUserRequest{Id: id}); err != nil {
		return err
	}
	delete(c.users, id)
	_, err := c.rpc.GetUser(ctx, &usersv1.GetUserRequest{Id: id})
	if connect.CodeOf(err) != connect.CodeNotFound {
		return fmt.Errorf("user %d after its delete: %v, want not_found", id, err)
	}
	return nil
}

func (c *mixedClient) list(ctx context.Context, rest bool) error {
	if rest {
		return getJSON(c.s, "/users?limit=10&sort=-id", http.StatusOK, nil)
	}
	_, err := c.rpc.ListUsers(ctx, &usersv1.ListUsersRequest{Limit: 10, Sort: "-id"})
	return err
}

func (c *mixedClient) post(ctx context.Context, rest bool, id int32, u *mixedUser) error {
	if rest {
		if err := writeJSONWithKey(c.s, "POST", fmt.Sprintf("/users/%d/posts", id), "", `{"title":"hello"}`, http.StatusCreated, nil); err != nil {
			return err
		}
	} else if _, err := c.rpc.CreateUserPost(ctx, &usersv1.CreateUserPostRequest{UserId: id, Post: &usersv1.Post{Title: "hello"}}); err != nil {
		return err
	}
	u.posts++
	return nil
}

func (c *mixedClient) listPosts(ctx context.Context, rest bool, id int32, u *mixedUser) error {
	var total int
	if rest {
		res, err := http.Get(fmt.Sprintf("%s/users/%d/posts", c.s.BaseURL, id))
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("GET posts of %d: %d", id, res.StatusCode)
		}
		total, _ = strconv.Atoi(res.Header.Get("X-Total-Count"))
	} else {
		res, err := c.rpc.ListUserPosts(ctx, &usersv1.ListUserPostsRequest{UserId: id})
		if err != nil {
			return err
		}
		total = int(res.GetTotalCount())
	}
	if total != u.posts {
		return fmt.Errorf("user %d has %d posts, want %d", id, total, u.posts)
	}
	return nil
}

// getJSON reads path and decodes the answer into out, if given; an answer other than want is an
// error.
func getJSON(s *testServer, path string, want int, out any) error {
	return sendJSON(s, "GET", path, nil, "", want, out)
}

// writeJSONWithKey sends a write with the test key and, unless key is "", an Idempotency-Key.
func writeJSONWithKey(s *testServer, method, path, key, body string, want int, out any) error {
	header := map[string]string{"x-api-key": apitest.Key}
	if key != "" {
		header["Idempotency-Key"] = key
	}
	if body != "" {
		header["Content-Type"] = "application/json"
	}
	return sendJSON(s, method, path, header, body, want, out)
}

// writeJSONIfMatch sends a merge patch conditioned on etag.
func writeJSONIfMatch(s *testServer, method, path, etag, body string, out any) error {
	header := map[string]string{"x-api-key": apitest.Key, "If-Match": etag, "Content-Type": "application/merge-patch+json"}
	return sendJSON(s, method, path, header, body, http.StatusOK, out)
}
