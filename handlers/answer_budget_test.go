package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// TestAnswersHeldForStalledClientsStayWithinTheBudget asks for a large page of posts on many
// streams of a connection that lets the server send no byte of any body (a window of 0), on REST
// and on Connect. The answers that fit in the budget are held; the rest are refused with 503 /
// unavailable, and so is every list while the budget is spent, while a single user and a write
// still pass. Once the client goes, its answers' bytes are given back.
func TestAnswersHeldForStalledClientsStayWithinTheBudget(t *testing.T) {
	const budget = 2 << 20
	s := startServerWith(t, Config{AnswerMemory: budget})
	user := apitest.IDOf(t, s.CreateUser(t, "poster", "editor"))
	for i := range 30 {
		resp := s.Do(t, apitest.H2CClient, request{Method: "POST", Path: fmt.Sprintf("/users/%d/posts", user), Key: true,
			Header: map[string]string{"Content-Type": "application/json"},
			Body:   fmt.Sprintf(`{"title":"post %d","body":%q}`, i, strings.Repeat("x", 10_000))})
		if resp.Status != http.StatusCreated {
			t.Fatalf("create post: %d %s", resp.Status, resp.Body)
		}
	}
	postsPath := fmt.Sprintf("/users/%d/posts?limit=100", user)
	rpcPath := "/users.v1.Users/ListUserPosts?connect=v1&encoding=json&message=" + url.QueryEscape(fmt.Sprintf(`{"userId":%d,"limit":100}`, user))
	page := s.Do(t, apitest.H2CClient, request{Method: "GET", Path: postsPath})
	if page.Status != http.StatusOK || len(page.Body) < 300_000 {
		t.Fatalf("the page of posts: %d, %d bytes", page.Status, len(page.Body))
	}

	stalled := apitest.DialRawH2C(t, s.BaseURL, 0)
	const streams = 20
	for i := range streams {
		path := postsPath
		if i%2 == 1 {
			path = rpcPath
		}
		stalled.Get(t, path)
	}
	held, refused := 0, 0
	for id, h := range stalled.ReadHeaders(t, streams, time.Now().Add(10*time.Second)) {
		switch status := h.Get(":status"); status {
		case "200":
			held++
		case "503":
			refused++
			if h.Get("Retry-After") != "1" && h.Get("Content-Type") != "application/json" { // Connect's errors carry no Retry-After
				t.Errorf("stream %d: a REST refusal without Retry-After: %v", id, h)
			}
		default:
			t.Fatalf("stream %d answered %s; want 200 or 503", id, status)
		}
	}
	if held == 0 || refused == 0 || held*len(page.Body) > budget {
		t.Fatalf("%d answers of %d bytes held and %d refused for a client that reads nothing; want them to fill at most the %d-byte budget",
			held, len(page.Body), refused, budget)
	}

	// While the budget is spent, lists are refused before any work, on every protocol ...
	resp := s.Do(t, apitest.H2CClient, request{Method: "GET", Path: postsPath})
	if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !strings.Contains(resp.ErrorMessage(t), "retry") {
		t.Fatalf("a list while the budget is spent: %d %v %s; want 503 with Retry-After", resp.Status, resp.Header, resp.Body)
	}
	for _, p := range apitest.RPCProtocols {
		_, err := s.RPCClient(p, "").ListUserPosts(t.Context(), &usersv1.ListUserPostsRequest{UserId: int32(user), Limit: 100})
		apitest.RPCWantCode(t, err, connect.CodeUnavailable)
	}
	// ... while one user, and a write, whose answers are small, still pass.
	if resp := s.Do(t, apitest.H2CClient, request{Method: "GET", Path: fmt.Sprintf("/users/%d", user)}); resp.Status != http.StatusOK {
		t.Fatalf("one user while the budget is spent: %d %s", resp.Status, resp.Body)
	}
	s.CreateUser(t, "written while the budget is spent", "viewer")

	// The client goes: its answers are given back, and lists are answered again.
	stalled.Conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp := s.Do(t, apitest.H2CClient, request{Method: "GET", Path: postsPath})
		if resp.Status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lists still answer %d %s 5 s after the stalled client went", resp.Status, resp.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d answers of %d bytes held, %d refused", held, len(page.Body), refused)
}
