package handlers

import (
	"net/url"
	"strings"
	"testing"

	"usersd/internal/apitest"
)

// TestErrorBodiesKeepHTMLCharacters: an error that quotes a request keeps its <, > and & as they
// are on every face (REST, Connect, SCIM), where encoding/json would write \u003c, \u003e and \u0026.
// JSON parsers read both the same; a person reading a terminal reads only one of them easily.
func TestErrorBodiesKeepHTMLCharacters(t *testing.T) {
	s := startServer(t)
	const quoted = "<admin>&"
	for _, c := range []struct {
		name string
		req  request
	}{
		{"REST", request{Method: "GET", Path: "/users?sort=" + url.QueryEscape(quoted)}},
		{"Connect", request{Method: "POST", Path: "/users.v1.Users/ListUsers", Header: apitest.JSONBody, Body: `{"sort":"` + quoted + `"}`}},
		{"SCIM", request{Method: "GET", Path: "/scim/v2/Users?filter=" + url.QueryEscape(quoted+` eq "x"`), Key: true}},
	} {
		res := s.Do(t, apitest.HTTP1Client, c.req)
		if res.Status < 400 || res.Status >= 500 {
			t.Fatalf("%s: %d %s, want a client error", c.name, res.Status, res.Body)
		}
		if body := string(res.Body); !strings.Contains(body, quoted) || strings.Contains(body, `\u00`) {
			t.Errorf("%s: %d %s, want the request's %q as it is", c.name, res.Status, res.Body, quoted)
		}
	}
}
