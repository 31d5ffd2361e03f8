package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/users"
)

// batchBody is the body of POST /users:batchCreate with users, each a JSON object.
func batchBody(users ...string) string {
	requests := make([]string, len(users))
	for i, u := range users {
		requests[i] = `{"user":` + u + `}`
	}
	return `{"requests":[` + strings.Join(requests, ",") + `]}`
}

// typicalUser is the JSON of a user as a provisioning system sends it, with every identity field.
func typicalUser(i int) string {
	return fmt.Sprintf(`{"name":"Ada Lovelace %[1]d","role":"engineer","userName":"ada.lovelace.%[1]d","givenName":"Ada",`+
		`"familyName":"Lovelace","email":"ada.lovelace.%[1]d@example.com","externalId":"8f14e45f-ceea-467f-a0e6-%012[1]d",`+
		`"labels":{"department":"analytical-engines","location":"london"}}`, i)
}

// typicalUserMessage is typicalUser as a message.
func typicalUserMessage(i int) *usersv1.User {
	u := &usersv1.User{}
	u.Name, u.Role, u.UserName = fmt.Sprintf("Ada Lovelace %d", i), "engineer", fmt.Sprintf("ada.lovelace.%d", i)
	u.GivenName, u.FamilyName, u.Email = "Ada", "Lovelace", fmt.Sprintf("ada.lovelace.%d@example.com", i)
	u.ExternalId = fmt.Sprintf("8f14e45f-ceea-467f-a0e6-%012d", i)
	u.Labels = map[string]string{"department": "analytical-engines", "location": "london"}
	return u
}

// usersOf decodes the users member of a batch's answer.
func usersOf(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var answer struct {
		Users []map[string]any `json:"users"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		t.Fatalf("batch answer %s: %v", body, err)
	}
	return answer.Users
}

// errorBody decodes a REST error body.
func errorBody(t *testing.T, res response) apitest.ErrorBody {
	t.Helper()
	var body apitest.ErrorBody
	if err := json.Unmarshal(res.Body, &body); err != nil {
		t.Fatalf("error body %s: %v", res.Body, err)
	}
	return body
}

// TestBatchesOverREST: POST /users:batchCreate creates every user in order, one change each, or
// none, naming the index of the user that failed it, once per Idempotency-Key; GET
// /users:batchGet answers in the order asked and names the first missing id; POST
// /users:batchDelete deletes every user in order or none; more than a batch may hold is refused.
func TestBatchesOverREST(t *testing.T) {
	s := startServerWith(t, Config{DeletedRetention: softDeleteRetention})
	do := func(method, path, body string, header map[string]string) response {
		h := map[string]string{}
		if body != "" {
			h["Content-Type"] = "application/json"
		}
		for k, v := range header {
			h[k] = v
		}
		return s.Do(t, apitest.HTTP1Client, request{Method: method, Path: path, Header: h, Key: true, Body: body})
	}
	watch := apitest.StartWatch(t, s.Server, apitest.WatchProtocols()[0], 0, "")

	key := map[string]string{"Idempotency-Key": "batch-1"}
	body := batchBody(`{"name":"Ada","userName":"ada"}`, `{"name":"Bob","role":"admin","id":"not an id","createdAt":false,"etag":7}`, `{"name":"Cy","email":"cy@example.com"}`)
	created := do("POST", "/users:batchCreate", body, key)
	if created.Status != http.StatusOK || created.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("batch create: %d %s", created.Status, created.Body)
	}
	made := usersOf(t, created.Body)
	var ids []int32
	for i, name := range []string{"Ada", "Bob", "Cy"} {
		if made[i]["name"] != name || made[i]["etag"] == nil {
			t.Fatalf("created user %d: %v, want %s", i, made[i], name)
		}
		ids = append(ids, apitest.UserID(t, made[i]))
	}
	if !slices.IsSorted(ids) {
		t.Errorf("created ids %v, want them growing in the batch's order", ids)
	}
	watch.WantChanges(t,
		apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: ids[0], Name: "Ada"},
		apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: ids[1], Name: "Bob"},
		apitest.Change{Kind: usersv1.UserEvent_KIND_CREATED, ID: ids[2], Name: "Cy"})

	// The key covers the whole batch: a retry gets the first answer, another batch with it is 422.
	apitest.WantReplay(t, created, do("POST", "/users:batchCreate", body, key))
	if res := do("POST", "/users:batchCreate", batchBody(`{"name":"Ada"}`), key); res.Status != http.StatusUnprocessableEntity {
		t.Errorf("another batch with the key: %d %s; want 422", res.Status, res.Body)
	}

	read := do("GET", fmt.Sprintf("/users:batchGet?ids=%d&ids=%d&ids=%d", ids[2], ids[0], ids[2]), "", nil)
	if got := usersOf(t, read.Body); read.Status != http.StatusOK || len(got) != 3 ||
		apitest.UserID(t, got[0]) != ids[2] || apitest.UserID(t, got[1]) != ids[0] || apitest.UserID(t, got[2]) != ids[2] {
		t.Errorf("batch get of %d, %d, %d: %d %s", ids[2], ids[0], ids[2], read.Status, read.Body)
	}
	missing := do("GET", fmt.Sprintf("/users:batchGet?ids=%d&ids=9998&ids=9999", ids[0]), "", nil)
	if missing.Status != http.StatusNotFound || errorBody(t, missing).Metadata["id"] != "9998" {
		t.Errorf("batch get with two missing ids: %d %s; want 404 naming 9998", missing.Status, missing.Body)
	}
	for _, bad := range []string{"/users:batchGet", "/users:batchGet?ids=0", "/users:batchGet?ids=1&ids=01", "/users:batchGet?ids=1&limit=2"} {
		if res := do("GET", bad, "", nil); res.Status != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s; want 400", bad, res.Status, res.Body)
		}
	}

	// One bad or clashing user refuses the batch, naming it; nothing is written.
	total := apitest.UserCount(t, s.BaseURL)
	for _, c := range []struct {
		body   string
		status int
		field  string
	}{
		{batchBody(`{"name":"D"}`, `{"name":"E","email":"no at sign"}`), http.StatusBadRequest, "requests[1].user.email"},
		{batchBody(`{"name":"D"}`, `{"name":""}`), http.StatusBadRequest, "requests[1].user.name"},
		{batchBody(`{"name":"D"}`, `{"name":"E"}`, `{"name":"F","userName":"ADA"}`), http.StatusConflict, "requests[2].user.user_name"},
		{batchBody(`{"name":"D","email":"d@example.com"}`, `{"name":"E"}`, `{"name":"F","email":"D@example.com"}`), http.StatusConflict, "requests[2].user.email"},
		{`{"requests":[{"user":{"name":"D"},"requestId":"own"}]}`, http.StatusBadRequest, "requests[0].request_id"},
		{`{"requests":[]}`, http.StatusBadRequest, "requests"},
	} {
		res := do("POST", "/users:batchCreate", c.body, nil)
		if res.Status != c.status || errorBody(t, res).Metadata["field"] != c.field || !strings.HasPrefix(res.ErrorMessage(t), c.field[:strings.IndexAny(c.field+".", ".")]) {
			t.Errorf("batch create %s: %d %s; want %d naming %s", c.body, res.Status, res.Body, c.status, c.field)
		}
	}
	if after := apitest.UserCount(t, s.BaseURL); after != total {
		t.Errorf("%s users after the refused batches, want %s", after, total)
	}

	// Deletes: all or nothing, in order.
	if res := do("POST", "/users:batchDelete", fmt.Sprintf(`{"ids":[%d,9999]}`, ids[0]), nil); res.Status != http.StatusNotFound ||
		errorBody(t, res).Metadata["id"] != "9999" || !strings.HasPrefix(res.ErrorMessage(t), "ids[1]") {
		t.Errorf("batch delete with a missing id: %d %s; want 404 naming ids[1], 9999", res.Status, res.Body)
	}
	if res := do("POST", "/users:batchDelete", fmt.Sprintf(`{"ids":[%d,%d]}`, ids[0], ids[0]), nil); res.Status != http.StatusBadRequest ||
		errorBody(t, res).Metadata["field"] != "ids[1]" {
		t.Errorf("batch delete of one user twice: %d %s; want 400 naming ids[1]", res.Status, res.Body)
	}
	deleted := do("POST", "/users:batchDelete", fmt.Sprintf(`{"ids":[%d,%d]}`, ids[2], ids[0]), nil)
	gone := usersOf(t, deleted.Body)
	if deleted.Status != http.StatusOK || len(gone) != 2 || apitest.UserID(t, gone[0]) != ids[2] || gone[0]["deleteTime"] == nil || gone[1]["purgeTime"] == nil {
		t.Fatalf("batch delete: %d %s", deleted.Status, deleted.Body)
	}
	watch.WantChanges(t,
		apitest.Change{Kind: usersv1.UserEvent_KIND_DELETED, ID: ids[2], Name: "Cy"},
		apitest.Change{Kind: usersv1.UserEvent_KIND_DELETED, ID: ids[0], Name: "Ada"})
	if res := do("GET", fmt.Sprintf("/users:batchGet?ids=%d&ids=%d", ids[1], ids[0]), "", nil); res.Status != http.StatusNotFound {
		t.Errorf("batch get of a deleted user: %d %s; want 404", res.Status, res.Body)
	}

	// More than a batch holds is refused, on every route.
	tooMany := make([]string, users.MaxBatchSize+1)
	query := make([]string, len(tooMany))
	for i := range tooMany {
		tooMany[i], query[i] = `{"name":"x"}`, "ids=1"
	}
	idList := strings.TrimSuffix(strings.Repeat("1,", len(tooMany)), ",")
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/users:batchCreate", batchBody(tooMany...)},
		{"GET", "/users:batchGet?" + strings.Join(query, "&"), ""},
		{"POST", "/users:batchDelete", `{"ids":[` + idList + `]}`},
	} {
		if res := do(c.method, c.path, c.body, nil); res.Status != http.StatusBadRequest {
			t.Errorf("%s %s with %d items: %d %s; want 400", c.method, c.path[:min(len(c.path), 30)], len(tooMany), res.Status, res.Body)
		}
	}
}

// TestABatchOfAThousandTypicalUsersFitsTheBodyLimit: a full batch of users with every identity
// field fits the default body limit, over REST and over the RPC protocols.
func TestABatchOfAThousandTypicalUsersFitsTheBodyLimit(t *testing.T) {
	s := startServer(t)
	all := make([]string, users.MaxBatchSize)
	for i := range all {
		all[i] = typicalUser(i)
	}
	body := batchBody(all...)
	if len(body) > DefaultMaxBodyBytes {
		t.Fatalf("a batch of %d typical users is %d bytes, over the default limit of %d", len(all), len(body), DefaultMaxBodyBytes)
	}
	res := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users:batchCreate", Header: apitest.JSONBody, Key: true, Body: body})
	if res.Status != http.StatusOK || len(usersOf(t, res.Body)) != len(all) {
		t.Fatalf("a batch of %d typical users, %d bytes: %d %.300s", len(all), len(body), res.Status, res.Body)
	}
	for n, p := range apitest.RPCProtocols {
		t.Run(p.Name, func(t *testing.T) {
			req := &usersv1.BatchCreateUsersRequest{}
			for i := range users.MaxBatchSize {
				req.Requests = append(req.Requests, &usersv1.CreateUserRequest{User: typicalUserMessage((n+1)*users.MaxBatchSize + i)})
			}
			created, err := s.RPCClient(p, apitest.Key).BatchCreateUsers(t.Context(), req)
			apitest.RPCMust(t, "BatchCreateUsers", err)
			if len(created.GetUsers()) != users.MaxBatchSize {
				t.Fatalf("created %d users", len(created.GetUsers()))
			}
			ids := make([]int32, len(created.GetUsers()))
			for i, u := range created.GetUsers() {
				ids[i] = u.GetId()
			}
			read, err := s.RPCClient(p, apitest.Key).BatchGetUsers(t.Context(), &usersv1.BatchGetUsersRequest{Ids: ids})
			apitest.RPCMust(t, "BatchGetUsers", err)
			if len(read.GetUsers()) != len(ids) || !proto.Equal(read.GetUsers()[999], created.GetUsers()[999]) {
				t.Fatalf("read back %d users", len(read.GetUsers()))
			}
		})
	}
}
