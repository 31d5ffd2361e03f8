package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/store/sqlstore"
	"usersd/store/storetest"
)

var mergePatchBody = map[string]string{"Content-Type": "application/merge-patch+json"}

// badIdentities are users whose identity breaks a rule, each with the field the error must name.
var badIdentities = []struct {
	name  string
	user  *usersv1.User
	field string
}{
	{"a user name too long", &usersv1.User{UserName: strings.Repeat("a", 257)}, "user_name"},
	{"a user name with a control character", &usersv1.User{UserName: "ada\x01"}, "user_name"},
	{"a user name with a leading space", &usersv1.User{UserName: " ada"}, "user_name"},
	{"a user name with a trailing space", &usersv1.User{UserName: "ada "}, "user_name"},
	{"a given name on two lines", &usersv1.User{GivenName: "Ada\nAugusta"}, "given_name"},
	{"a family name too long", &usersv1.User{FamilyName: strings.Repeat("L", 201)}, "family_name"},
	{"an email without @", &usersv1.User{Email: "ada.example.com"}, "email"},
	{"an email with two @", &usersv1.User{Email: "ada@b@example.com"}, "email"},
	{"an email with nothing before @", &usersv1.User{Email: "@example.com"}, "email"},
	{"an email with nothing after @", &usersv1.User{Email: "ada@"}, "email"},
	{"an email with a space", &usersv1.User{Email: "ada lovelace@example.com"}, "email"},
	{"an email too long", &usersv1.User{Email: "a@" + strings.Repeat("e", 253)}, "email"},
	{"an external id too long", &usersv1.User{ExternalId: strings.Repeat("x", 257)}, "external_id"},
	{"an external id with a control character", &usersv1.User{ExternalId: "x\x7f"}, "external_id"},
	{"a label key with upper case", &usersv1.User{Labels: map[string]string{"Team": "a"}}, "labels"},
	{"a label key starting with a digit", &usersv1.User{Labels: map[string]string{"1team": "a"}}, "labels"},
	{"a label key too long", &usersv1.User{Labels: map[string]string{"k" + strings.Repeat("a", 63): "a"}}, "labels"},
	{"a label value too long", &usersv1.User{Labels: map[string]string{"team": strings.Repeat("v", 257)}}, "labels[team]"},
	{"too many labels", &usersv1.User{Labels: manyLabels(33)}, "labels"},
}

func manyLabels(n int) map[string]string {
	labels := map[string]string{}
	for i := range n {
		labels[fmt.Sprintf("k%d", i)] = "v"
	}
	return labels
}

// TestEveryBadIdentityIsRefusedNamingItsField: a create with a bad identity field is 400 naming
// the field on REST, and invalid_argument with its ErrorInfo and BadRequest on every RPC protocol;
// nothing is written.
func TestEveryBadIdentityIsRefusedNamingItsField(t *testing.T) {
	s := startServer(t)
	for _, c := range badIdentities {
		t.Run(c.name, func(t *testing.T) {
			user := proto.Clone(c.user).(*usersv1.User)
			user.Name = "Ada"
			body, err := marshalUserJSON(user)
			if err != nil {
				t.Fatal(err)
			}
			res := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: string(body)})
			var errBody apitest.ErrorBody
			if res.Status != http.StatusBadRequest || json.Unmarshal(res.Body, &errBody) != nil || errBody.Reason != "INVALID_FIELD" ||
				errBody.Metadata["field"] != c.field || len(errBody.FieldViolations) != 1 || errBody.FieldViolations[0].Field != c.field {
				t.Fatalf("REST: %d %s, want 400 INVALID_FIELD naming %s", res.Status, res.Body, c.field)
			}
			for _, p := range apitest.RPCProtocols {
				_, err := s.RPCClient(p, apitest.Key).CreateUser(context.Background(), &usersv1.CreateUserRequest{User: user})
				var ce *connect.Error
				if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
					t.Fatalf("%s: %v, want invalid_argument", p.Name, err)
				}
				wantDetails(t, p.Name, ce, "INVALID_FIELD", map[string]string{"field": c.field})
			}
			if ids := s.ListIDs(t); len(ids) != 0 {
				t.Fatalf("users %v were written", ids)
			}
		})
	}
}

// marshalUserJSON is the protojson form of a user, as a REST client sends it.
func marshalUserJSON(u *usersv1.User) ([]byte, error) { return protojson.Marshal(u) }

// identityBackends are the stores the clash cases run on: a SQLite file and a PostgreSQL schema.
var identityBackends = []struct {
	name string
	dsn  func(t *testing.T) string
}{
	{"SQLite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "users.db") }},
	{"PostgreSQL", func(t *testing.T) string { return storetest.PostgresSchema(t) }},
}

// startServerOn starts a server on the database at dsn, with a store of its own: two of them on one
// PostgreSQL schema are two replicas.
func startServerOn(t *testing.T, dsn string) *testServer {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return startServerWith(t, Config{Store: st})
}

// TestAUniqueIdentityClashIsAlreadyExistsNamingTheField: user names and emails clash ignoring
// case, external ids exactly; a clash on create, replace or patch is 409 ALREADY_EXISTS naming the
// field on REST and already_exists on every RPC protocol, and writes nothing.
func TestAUniqueIdentityClashIsAlreadyExistsNamingTheField(t *testing.T) {
	for _, backend := range identityBackends {
		t.Run(backend.name, func(t *testing.T) {
			s := startServerOn(t, backend.dsn(t))
			ada := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true,
				Body: `{"name":"Ada","userName":"Ada.L","email":"Ada@Example.com","externalId":"ext-1"}`})
			if ada.Status != http.StatusCreated {
				t.Fatalf("create Ada: %d %s", ada.Status, ada.Body)
			}
			bob := s.CreateUser(t, "Bob", "")
			bobPath := fmt.Sprintf("/users/%d", apitest.IDOf(t, bob))
			for _, c := range []struct{ field, member, value string }{
				{"user_name", "userName", "ADA.l"},
				{"email", "email", "ada@EXAMPLE.com"},
				{"external_id", "externalId", "ext-1"},
			} {
				member := fmt.Sprintf(`"%s":%q`, c.member, c.value)
				for _, w := range []request{
					{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: `{"name":"Copy",` + member + `}`},
					{Method: "PUT", Path: bobPath, Header: apitest.JSONBody, Key: true, Body: `{"name":"Bob",` + member + `}`},
					{Method: "PATCH", Path: bobPath, Header: mergePatchBody, Key: true, Body: `{` + member + `}`},
				} {
					res := s.Do(t, apitest.HTTP1Client, w)
					var body apitest.ErrorBody
					if res.Status != http.StatusConflict || json.Unmarshal(res.Body, &body) != nil || body.Reason != "ALREADY_EXISTS" ||
						!maps.Equal(body.Metadata, map[string]string{"field": c.field}) {
						t.Fatalf("%s %s with %s: %d %s, want 409 ALREADY_EXISTS naming %s", w.Method, w.Path, member, res.Status, res.Body, c.field)
					}
				}
				user := &usersv1.User{Name: "Copy"}
				switch c.field {
				case "user_name":
					user.UserName = c.value
				case "email":
					user.Email = c.value
				default:
					user.ExternalId = c.value
				}
				for _, p := range apitest.RPCProtocols {
					_, err := s.RPCClient(p, apitest.Key).CreateUser(context.Background(), &usersv1.CreateUserRequest{User: user})
					var ce *connect.Error
					if !errors.As(err, &ce) || ce.Code() != connect.CodeAlreadyExists {
						t.Fatalf("%s: %v, want already_exists", p.Name, err)
					}
					wantDetails(t, p.Name, ce, "ALREADY_EXISTS", map[string]string{"field": c.field})
				}
			}
			if got := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: bobPath}); !strings.Contains(string(got.Body), `"etag":"\"1\""`) {
				t.Fatalf("Bob after the refused writes: %s, want etag \"1\"", got.Body)
			}
			// An external id differing in case alone is another id.
			other := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true,
				Body: `{"name":"Other","externalId":"EXT-1"}`})
			if other.Status != http.StatusCreated {
				t.Fatalf("an external id differing in case: %d %s, want 201", other.Status, other.Body)
			}
		})
	}
}

// TestTwoReplicasRacingForOneUserName: two servers on one PostgreSQL schema, each with its own
// store and batches, create users with the same user name at once: exactly one wins, every other
// is 409 naming user_name.
func TestTwoReplicasRacingForOneUserName(t *testing.T) {
	dsn := storetest.PostgresSchema(t)
	replicas := []*testServer{startServerOn(t, dsn), startServerOn(t, dsn)}
	const perReplica = 6
	statuses := make(chan response, 2*perReplica)
	var wg sync.WaitGroup
	for i := range 2 * perReplica {
		wg.Go(func() {
			statuses <- replicas[i%2].Do(t, apitest.NewH2CClient(), request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true,
				Body: fmt.Sprintf(`{"name":"Racer %d","userName":"racer"}`, i)})
		})
	}
	wg.Wait()
	close(statuses)
	won := 0
	for res := range statuses {
		switch {
		case res.Status == http.StatusCreated:
			won++
		case res.Status != http.StatusConflict || !strings.Contains(string(res.Body), `"field":"user_name"`):
			t.Fatalf("a racing create: %d %s, want 201 or 409 naming user_name", res.Status, res.Body)
		}
	}
	if won != 1 {
		t.Fatalf("%d racing creates won, want exactly 1", won)
	}
}

// TestIdentityFieldsTravelEverywhere: a user created with every identity field over REST reads
// back the same over REST and every RPC protocol; a user created with name alone is active.
func TestIdentityFieldsTravelEverywhere(t *testing.T) {
	s := startServer(t)
	created := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true,
		Body: `{"name":"Ada","userName":"ada","givenName":"Ada","familyName":"Lovelace","email":"ada@example.com","externalId":"e1","active":false,"labels":{"team":"engine"}}`})
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	u := apitest.DecodeObject(t, created.Body)
	id := int32(apitest.IDOf(t, u))
	want := &usersv1.User{UserName: "ada", GivenName: "Ada", FamilyName: "Lovelace", Email: "ada@example.com", ExternalId: "e1",
		Active: proto.Bool(false), Labels: map[string]string{"team": "engine"}}
	for _, p := range apitest.RPCProtocols {
		got := apitest.RPCGet(t, s.RPCClient(p, ""), id)
		if got.GetUserName() != want.GetUserName() || got.GetGivenName() != want.GetGivenName() || got.GetFamilyName() != want.GetFamilyName() ||
			got.GetEmail() != want.GetEmail() || got.GetExternalId() != want.GetExternalId() || got.Active == nil || got.GetActive() ||
			!maps.Equal(got.GetLabels(), want.GetLabels()) {
			t.Fatalf("%s read %v, want the identity %v", p.Name, got, want)
		}
	}
	plain := apitest.RPCCreate(t, s.RPCClient(apitest.RPCProtocols[0], apitest.Key), "Plain", "")
	if plain.Active == nil || !plain.GetActive() || plain.GetUserName() != "" || len(plain.GetLabels()) != 0 {
		t.Fatalf("a user created with a name alone: %v, want active with no identity", plain)
	}
}

// TestLabelsMergeKeyByKeyAndMasksReplaceThem: a merge patch sets and removes labels key by key
// and leaves the others; labels: null removes them all; an update mask naming labels replaces the
// map, and one naming labels.KEY sets or removes that label alone.
func TestLabelsMergeKeyByKeyAndMasksReplaceThem(t *testing.T) {
	s := startServer(t)
	created := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true,
		Body: `{"name":"Ada","labels":{"a":"1","b":"2","c":"3"}}`})
	id := apitest.IDOf(t, apitest.DecodeObject(t, created.Body))
	path := fmt.Sprintf("/users/%d", id)
	patch := func(body string) map[string]any {
		t.Helper()
		res := s.Do(t, apitest.HTTP1Client, request{Method: "PATCH", Path: path, Header: mergePatchBody, Key: true, Body: body})
		if res.Status != http.StatusOK {
			t.Fatalf("PATCH %s: %d %s", body, res.Status, res.Body)
		}
		return apitest.DecodeObject(t, res.Body)
	}
	labelsOf := func(u map[string]any) string { b, _ := json.Marshal(u["labels"]); return string(b) }
	if got := labelsOf(patch(`{"labels":{"a":"one","b":null,"d":"4"}}`)); got != `{"a":"one","c":"3","d":"4"}` {
		t.Fatalf("merged into %s, want a changed, b removed, c kept, d added", got)
	}
	if got := patch(`{"name":"Ada L"}`); labelsOf(got) != `{"a":"one","c":"3","d":"4"}` {
		t.Fatalf("a patch without labels left %s, want them kept", labelsOf(got))
	}
	bad := s.Do(t, apitest.HTTP1Client, request{Method: "PATCH", Path: path, Header: mergePatchBody, Key: true, Body: `{"labels":{"Bad":"x"}}`})
	if bad.Status != http.StatusBadRequest || !strings.Contains(string(bad.Body), `"field":"labels"`) {
		t.Fatalf("a bad label key: %d %s, want 400 naming labels", bad.Status, bad.Body)
	}
	tooMany, _ := json.Marshal(map[string]any{"labels": manyLabels(30)})
	over := s.Do(t, apitest.HTTP1Client, request{Method: "PATCH", Path: path, Header: mergePatchBody, Key: true, Body: string(tooMany)})
	if over.Status != http.StatusBadRequest || !strings.Contains(string(over.Body), `"field":"labels"`) {
		t.Fatalf("a merge to 33 labels: %d %s, want 400 naming labels", over.Status, over.Body)
	}
	if got := patch(`{"labels":null}`); got["labels"] != nil {
		t.Fatalf("labels: null left %s, want none", labelsOf(got))
	}

	c := s.RPCClient(apitest.RPCProtocols[0], apitest.Key)
	set := func(user *usersv1.User, paths ...string) *usersv1.User {
		t.Helper()
		res, err := c.UpdateUser(context.Background(), &usersv1.UpdateUserRequest{Id: int32(id), User: user, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}})
		apitest.RPCMust(t, "UpdateUser", err)
		return res.GetUser()
	}
	set(&usersv1.User{Labels: map[string]string{"x": "1", "y": "2"}}, "labels")
	if got := set(&usersv1.User{Labels: map[string]string{"z": "3"}}, "labels"); !maps.Equal(got.GetLabels(), map[string]string{"z": "3"}) {
		t.Fatalf("an update mask naming labels left %v, want the map replaced", got.GetLabels())
	}
	if got := set(&usersv1.User{Labels: map[string]string{"w": "0"}}, "labels.w", "labels.z"); !maps.Equal(got.GetLabels(), map[string]string{"w": "0"}) {
		t.Fatalf("labels.w set and labels.z removed left %v", got.GetLabels())
	}
}

// TestReplaceClearsAbsentIdentityAndEveryChangeMovesTheEtag: PUT sets every field, so one left out
// is cleared (active is true again); and a change of any one identity field gives a new etag.
func TestReplaceClearsAbsentIdentityAndEveryChangeMovesTheEtag(t *testing.T) {
	s := startServer(t)
	created := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true,
		Body: `{"name":"Ada","userName":"ada","givenName":"A","familyName":"L","email":"a@b","externalId":"e","active":false,"labels":{"k":"v"}}`})
	path := fmt.Sprintf("/users/%d", apitest.IDOf(t, apitest.DecodeObject(t, created.Body)))
	replaced := s.Do(t, apitest.HTTP1Client, request{Method: "PUT", Path: path, Header: apitest.JSONBody, Key: true, Body: `{"name":"Ada"}`})
	got := apitest.DecodeObject(t, replaced.Body)
	for _, member := range []string{"userName", "givenName", "familyName", "email", "externalId", "labels"} {
		if got[member] != nil {
			t.Fatalf("PUT without %s kept it: %s", member, replaced.Body)
		}
	}
	if replaced.Status != http.StatusOK || got["active"] != true {
		t.Fatalf("PUT: %d %s, want active true again", replaced.Status, replaced.Body)
	}
	etag := replaced.Header.Get("ETag")
	for _, body := range []string{`{"userName":"ada"}`, `{"givenName":"A"}`, `{"familyName":"L"}`, `{"email":"a@b"}`,
		`{"externalId":"e"}`, `{"active":false}`, `{"labels":{"k":"v"}}`} {
		res := s.Do(t, apitest.HTTP1Client, request{Method: "PATCH", Path: path, Header: mergePatchBody, Key: true, Body: body})
		if res.Status != http.StatusOK || res.Header.Get("ETag") == etag {
			t.Fatalf("PATCH %s: %d, ETag %q after %q: want a new etag", body, res.Status, res.Header.Get("ETag"), etag)
		}
		etag = res.Header.Get("ETag")
	}
}

// TestAnIdempotentCreateCoversTheIdentity: a repeat of a create with its key answers the first
// answer, identity included; the same key with another identity is another request.
func TestAnIdempotentCreateCoversTheIdentity(t *testing.T) {
	s := startServer(t)
	send := func(body string) response {
		return s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Key: true, Body: body,
			Header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": "identity-1"}})
	}
	first := send(`{"name":"Ada","email":"ada@example.com","labels":{"k":"v"}}`)
	repeat := send(`{"name":"Ada","email":"ada@example.com","labels":{"k":"v"}}`)
	if first.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", first.Status, first.Body)
	}
	apitest.WantReplay(t, first, repeat)
	other := send(`{"name":"Ada","email":"other@example.com","labels":{"k":"v"}}`)
	if other.Status/100 != 4 || other.ErrorReason(t) != "REQUEST_MISMATCH" {
		t.Fatalf("the key with another email: %d %s, want REQUEST_MISMATCH", other.Status, other.Body)
	}
}

// TestWatchesCarryTheIdentity: every way of watching users (the four RPC protocols, SSE over
// HTTP/1.1 and h2c) delivers the identity of a created and of an updated user.
func TestWatchesCarryTheIdentity(t *testing.T) {
	s := startServer(t)
	var watches []*apitest.WatchStream
	protocols := apitest.WatchProtocols()
	for _, p := range protocols {
		watches = append(watches, apitest.StartWatch(t, s.Server, p, 0, ""))
	}
	created := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true,
		Body: `{"name":"Ada","userName":"ada","email":"ada@example.com","externalId":"e1","labels":{"team":"engine"}}`})
	path := fmt.Sprintf("/users/%d", apitest.IDOf(t, apitest.DecodeObject(t, created.Body)))
	s.Do(t, apitest.HTTP1Client, request{Method: "PATCH", Path: path, Header: mergePatchBody, Key: true, Body: `{"active":false,"labels":{"team":null}}`})
	for i, w := range watches {
		first, second := w.Next(t, 10*time.Second).GetUser(), w.Next(t, 10*time.Second).GetUser()
		if first.GetUserName() != "ada" || first.GetEmail() != "ada@example.com" || first.GetExternalId() != "e1" ||
			!first.GetActive() || first.GetLabels()["team"] != "engine" {
			t.Fatalf("%s: the create carried %v, want the identity", protocols[i].Name, first)
		}
		if second.Active == nil || second.GetActive() || len(second.GetLabels()) != 0 || second.GetUserName() != "ada" {
			t.Fatalf("%s: the update carried %v, want inactive, no labels, the user name kept", protocols[i].Name, second)
		}
	}
}
