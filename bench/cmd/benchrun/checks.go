package main

import (
	"context"
	"encoding/json"
	"errors"
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
	return sameUser(got, fixture.All(42)[41])
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
	return sameUser(jsonUser{ID: got.GetId(), Name: got.GetName(), Role: got.GetRole(), CreatedAt: got.GetCreatedAt().AsTime()}, fixture.All(grpcUserID)[grpcUserID-1])
}

// listWant is what a list query must answer: X-Total-Count, how many users on the page, and,
// when known, their ids in order.
type listWant struct {
	total, items int
	ids          []int32
}

// checkTotal: GET /users?query answers the exact X-Total-Count of the data set, the right number of
// users and, when want knows them, the right users in the right order. "{cursor}" in query is the
// page token that the scenario's prepare step found.
func checkTotal(query string, want func(*runner, summaryOf) listWant) func(*runner, string) error {
	return func(r *runner, addr string) error {
		query := withCursor(query, r.cursor)
		w := want(r, r.data())
		res, body, err := fetch("GET", "http://"+addr+"/users?"+query, "", nil)
		if err != nil {
			return err
		}
		var page []jsonUser
		if err := json.Unmarshal(body, &page); err != nil {
			return fmt.Errorf("GET /users?%s: %w", query, err)
		}
		if got := res.Header.Get("X-Total-Count"); got != strconv.Itoa(w.total) {
			return fmt.Errorf("GET /users?%s: X-Total-Count %q, want %d", query, got, w.total)
		}
		if len(page) != w.items {
			return fmt.Errorf("GET /users?%s: %d users, want %d", query, len(page), w.items)
		}
		for i, id := range w.ids {
			if page[i].ID != id {
				return fmt.Errorf("GET /users?%s: user %d of the page is %d, want %d", query, i+1, page[i].ID, id)
			}
		}
		return nil
	}
}

// checkSpreadUser: GET /users/{id} answers the fixture's user id, the last (and most expensive to
// find, for the fixture) that the load asks for.
func checkSpreadUser(id int) func(*runner, string) error {
	return func(r *runner, addr string) error {
		_, answer, err := fetch("GET", "http://"+addr+"/users/"+strconv.Itoa(id), "", nil)
		if err != nil {
			return err
		}
		var got jsonUser
		if err := json.Unmarshal(answer, &got); err != nil {
			return err
		}
		return sameUser(got, r.user(int32(id)))
	}
}

// listUsersPage is the Connect ListUsers answer, in JSON.
type listUsersPage struct {
	Users         []jsonUser `json:"users"`
	TotalCount    int        `json:"totalCount"`
	NextPageToken string     `json:"nextPageToken"`
}

// listUsersRPC calls ListUsers over the Connect protocol with a JSON body.
func listUsersRPC(addr, body string) (listUsersPage, error) {
	_, answer, err := fetch("POST", "http://"+addr+"/users.v1.Users/ListUsers", body, http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return listUsersPage{}, err
	}
	var page listUsersPage
	if err := json.Unmarshal(answer, &page); err != nil {
		return listUsersPage{}, fmt.Errorf("ListUsers %s: %w", body, err)
	}
	return page, nil
}

// prepareCursor finds a page token about halfway through the collection, newest first: the
// next_page_token of page deepPage, read by number once (it costs what it skips), and the users of
// the page after it, read by number too, which the cursor page must equal.
func prepareCursor(r *runner, addr string) error {
	p := deepPage(r.current.users)
	at, err := listUsersRPC(addr, fmt.Sprintf(`{"sort":"-createdAt","page":%d,"limit":%d}`, p, pageSize))
	if err != nil {
		return err
	}
	next, err := listUsersRPC(addr, fmt.Sprintf(`{"sort":"-createdAt","page":%d,"limit":%d}`, p+1, pageSize))
	if err != nil {
		return err
	}
	if at.NextPageToken == "" || len(next.Users) != pageSize {
		return fmt.Errorf("ListUsers page %d of %d users: no next_page_token (%q) or no full page after it (%d users)",
			p, r.current.users, at.NextPageToken, len(next.Users))
	}
	r.cursor, r.cursorIDs = at.NextPageToken, nil
	for _, u := range next.Users {
		r.cursorIDs = append(r.cursorIDs, u.ID)
	}
	return nil
}

// checkCreatedTotal: after the creates, X-Total-Count equals the users in the database. Only
// creates ran, so counts only grow: when two totals read before and after the count agree, the
// count must equal them (a create that straggles in between changes the second total, and the
// three are read again).
func checkCreatedTotal(r *runner, addr, db string) error {
	total := func() (int64, error) {
		res, _, err := fetch("GET", "http://"+addr+"/users?limit=1", "", nil)
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(res.Header.Get("X-Total-Count"), 10, 64)
	}
	for attempt := 0; ; attempt++ {
		before, err1 := total()
		rows, err2 := r.countUsers(db)
		after, err3 := total()
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		if before == after {
			if rows != before {
				return fmt.Errorf("X-Total-Count %d, but %d users in the database", before, rows)
			}
			return nil
		}
		if attempt == 10 {
			return fmt.Errorf("X-Total-Count kept changing after the load (%d, then %d)", before, after)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
