package scim_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestListsSortByUserNameIgnoringCase holds sortBy=userName to RFC 7644 section 3.4.2.3: userName is
// not case-exact, so it sorts ignoring case; ascending by default; descending on request; pages by
// startIndex and count in the same order, with the exact total on each.
func TestListsSortByUserNameIgnoringCase(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *server) {
		for _, userName := range []string{"bob", "Alice", "carol", "ALAN", "Zed", "alice2"} {
			s.do(http.MethodPost, "/scim/v2/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"`+userName+`"}`).
				want(t, http.StatusCreated)
		}
		ascending := []string{"ALAN", "Alice", "alice2", "bob", "carol", "Zed"}
		descending := slices.Clone(ascending)
		slices.Reverse(descending)
		for _, c := range []struct {
			query string
			want  []string
		}{
			{"sortBy=userName", ascending},
			{"sortBy=USERNAME&sortOrder=ascending", ascending},
			{"sortBy=userName&sortOrder=descending", descending},
		} {
			var got []string
			for start := 1; start <= len(c.want); start += 4 {
				page := s.do(http.MethodGet, "/scim/v2/Users?"+c.query+"&count=4&startIndex="+strconv.Itoa(start), "").want(t, http.StatusOK)
				if total, _ := page.body["totalResults"].(float64); int(total) != len(c.want) {
					t.Errorf("%s from %d: totalResults %v, want %d", c.query, start, page.body["totalResults"], len(c.want))
				}
				resources, _ := page.body["Resources"].([]any)
				for i := range resources {
					got = append(got, str(resources, strconv.Itoa(i)+".userName"))
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", c.query, got, c.want)
			}
		}
		s.do(http.MethodGet, "/scim/v2/Users?sortBy=nickName", "").wantError(t, http.StatusBadRequest, "invalidValue")
		search := `{"schemas":["urn:ietf:params:scim:api:messages:2.0:SearchRequest"],"sortBy":"userName","sortOrder":"descending","count":2}`
		page := s.do(http.MethodPost, "/scim/v2/Users/.search", search).want(t, http.StatusOK)
		if got := []string{str(page.body, "Resources.0.userName"), str(page.body, "Resources.1.userName")}; !slices.Equal(got, descending[:2]) {
			t.Errorf(".search sorted by userName descending: %v, want %v", got, descending[:2])
		}
		filtered := url.Values{"sortBy": {"userName"}, "filter": {`userName sw "al"`}}
		page = s.do(http.MethodGet, "/scim/v2/Users?"+filtered.Encode(), "").want(t, http.StatusOK)
		var got []string
		resources, _ := page.body["Resources"].([]any)
		for i := range resources {
			got = append(got, strings.ToLower(str(resources, strconv.Itoa(i)+".userName")))
		}
		if !slices.Equal(got, []string{"alan", "alice", "alice2"}) {
			t.Errorf("userName sw \"al\" sorted by userName: %v", got)
		}
	})
}
