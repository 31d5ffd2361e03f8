package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"usersd/bench/internal/fixture"
	usersv1 "usersd/gen/users/v1"
)

var httpClient = &http.Client{Timeout: 60 * time.Second}

// jsonUser is the part of a user's JSON that the checks compare with the fixture.
type jsonUser struct {
	ID        int32     `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
}

func wantUser(id int32) fixture.User { return fixture.All(int(id))[id-1] }

func sameUser(got jsonUser, want fixture.User) error {
	if got.ID != want.ID || got.Name != want.Name || got.Role != want.Role || !got.CreatedAt.Equal(want.CreatedAt) {
		return fmt.Errorf("got user %+v, want %+v", got, want)
	}
	return nil
}

// fetch sends one request and returns the answer's body, failing on any status but 200.
func fetch(method, url, body string, header http.Header) (*http.Response, []byte, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: %s: %s", method, url, res.Status, b)
	}
	return res, b, err
}

// checkRESTUser: GET /users/42 answers user 42 of the fixture (usersd and the net/http baseline).
func checkRESTUser(_ *runner, addr string) error {
	return checkJSONUser("GET", "http://"+addr+"/users/42", "", nil)
}

// checkConnectUser: the Connect JSON GetUser answers user 42 of the fixture.
func checkConnectUser(_ *runner, addr string) error {
	return checkJSONUser("POST", "http://"+addr+"/users.v1.Users/GetUser", `{"id":42}`, http.Header{"Content-Type": {"application/json"}})
}

// checkJSONUser sends one request and checks that its JSON answer is user 42 of the fixture.
func checkJSONUser(method, url, body string, header http.Header) error {
	_, answer, err := fetch(method, url, body, header)
	if err != nil {
		return err
	}
	var got jsonUser
	if err := json.Unmarshal(answer, &got); err != nil {
		return err
	}
	return sameUser(got, wantUser(42))
}

// checkGRPCUser: a grpc-go client's GetUser answers the user that the gRPC load asks for.
func checkGRPCUser(_ *runner, addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := new(usersv1.User)
	if err := conn.Invoke(ctx, "/users.v1.Users/GetUser", &usersv1.GetUserRequest{Id: grpcUserID}, got); err != nil {
		return err
	}
	return sameUser(jsonUser{ID: got.GetId(), Name: got.GetName(), Role: got.GetRole(), CreatedAt: got.GetCreatedAt().AsTime()}, wantUser(grpcUserID))
}

// checkUsersd: usersd answers its health check.
func checkUsersd(_ *runner, addr string) error {
	_, _, err := fetch("GET", "http://"+addr+"/health", "", nil)
	return err
}

// checkTotal: the list query answers a full page and the exact X-Total-Count of the seeded file:
// every user, or every user with role when role is set.
func checkTotal(query, role string) func(*runner, string) error {
	return func(r *runner, addr string) error {
		res, body, err := fetch("GET", "http://"+addr+"/users?"+query, "", nil)
		if err != nil {
			return err
		}
		var page []jsonUser
		if err := json.Unmarshal(body, &page); err != nil {
			return err
		}
		if len(page) != 20 {
			return fmt.Errorf("GET /users?%s: %d users, want a full page of 20", query, len(page))
		}
		summary := r.summaries[r.current.users]
		want := summary.Users
		if role != "" {
			want = summary.Roles[role]
		}
		if got := res.Header.Get("X-Total-Count"); got != strconv.Itoa(want) {
			return fmt.Errorf("GET /users?%s: X-Total-Count %q, want %d", query, got, want)
		}
		return nil
	}
}
