package apitest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// ListEveryUser pages through GET /users, 100 at a time, and returns every user in order.
func (s Server) ListEveryUser(t *testing.T) []map[string]any {
	t.Helper()
	var all []map[string]any
	for page := 1; ; page++ {
		res := s.Do(t, HTTP1Client, Request{Method: "GET", Path: fmt.Sprintf("/users?limit=100&page=%d", page)})
		if res.Status != http.StatusOK {
			t.Fatalf("list page %d: %d %s", page, res.Status, res.Body)
		}
		users := DecodeArray(t, res.Body)
		if len(users) == 0 {
			return all
		}
		all = append(all, users...)
	}
}

// ListIDs pages through GET /users and returns every id in order.
func (s Server) ListIDs(t *testing.T) []int {
	t.Helper()
	var ids []int
	for _, u := range s.ListEveryUser(t) {
		ids = append(ids, IDOf(t, u))
	}
	return ids
}

// PostJSON posts body to url as JSON with the test key, and returns the answer's status and body.
// Unlike Do, it may run outside the test's goroutine: it reports and does not fail.
func PostJSON(url, body string) (int, []byte, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", Key)
	res, err := HTTP1Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(res.Body)
	return res.StatusCode, answer, err
}
