package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// TestNamesShowWhatTheySay refuses single-line text that would display as something else, or as
// nothing: separators that break the line, bidirectional overrides and isolates that reorder it,
// and names made only of invisible characters. Names in right-to-left scripts, with the
// bidirectional marks that mixed text needs, are kept byte for byte.
func TestNamesShowWhatTheySay(t *testing.T) {
	s := startServer(t)
	user := apitest.IDOf(t, s.CreateUser(t, "poster", ""))
	refused := []struct {
		name, path, body, says string
	}{
		{"a name of zero-width spaces", "/users", `{"name":"\u200b\u200b"}`, "visible character"},
		{"a name of a zero-width joiner and a byte order mark", "/users", `{"name":"\u200d\ufeff"}`, "visible character"},
		{"a name of Hangul fillers and spaces", "/users", `{"name":"\u3164 \u3164"}`, "visible character"},
		{"a name of a blank Braille pattern", "/users", `{"name":"\u2800"}`, "visible character"},
		{"a name with a line separator", "/users", `{"name":"Ada\u2028Lovelace"}`, "one line"},
		{"a name with a paragraph separator", "/users", `{"name":"Ada\u2029"}`, "one line"},
		{"a name with a right-to-left override", "/users", `{"name":"invoice\u202egpj.exe"}`, "bidirectional"},
		{"a role with a left-to-right isolate", "/users", `{"name":"x","role":"\u2066admin\u2069"}`, "bidirectional"},
		{"a post title with an embedding", fmt.Sprintf("/users/%d/posts", user), `{"title":"\u202bhello"}`, "bidirectional"},
	}
	for _, c := range refused {
		res := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: c.path, Header: apitest.JSONBody, Key: true, Body: c.body})
		if res.Status != http.StatusBadRequest || !strings.Contains(res.ErrorMessage(t), c.says) {
			t.Errorf("%s: %d %s, want 400 saying %q", c.name, res.Status, res.Body, c.says)
		}
	}
	for _, p := range apitest.RPCProtocols {
		_, err := s.RPCClient(p, apitest.Key).CreateUser(t.Context(), &usersv1.CreateUserRequest{User: &usersv1.User{Name: "a\u202eb"}})
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: CreateUser with an override: %v, want invalid_argument", p.Name, err)
		}
	}

	for _, name := range []string{
		"علي \u200f(Ali)",  // Arabic, a right-to-left mark, Latin
		"שרה\u200e-Levi",   // Hebrew, a left-to-right mark
		"Zoë 李 \U0001F600", // accents, CJK, an emoji
		"A\u200dB",         // a zero-width joiner between visible letters
	} {
		body, _ := json.Marshal(map[string]string{"name": name})
		res := s.Do(t, apitest.HTTP1Client, request{Method: "POST", Path: "/users", Header: apitest.JSONBody, Key: true, Body: string(body)})
		if res.Status != http.StatusCreated {
			t.Errorf("%q: %d %s, want 201", name, res.Status, res.Body)
			continue
		}
		if got := apitest.DecodeObject(t, res.Body)["name"]; got != name {
			t.Errorf("%q came back as %q", name, got)
		}
	}
}
