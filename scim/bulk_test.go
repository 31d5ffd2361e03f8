package scim_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"usersd/handlers"
)

const bulkSchema = `"schemas":["urn:ietf:params:scim:api:messages:2.0:BulkRequest"]`

// TestABulkRequestRunsEachOperationAsItsOwnRequest: a create, a PATCH of it by its bulkId, a
// clashing create and a delete, each answered in order with its own status; failOnErrors stops
// the rest; more operations than ServiceProviderConfig allows are refused whole.
func TestABulkRequestRunsEachOperationAsItsOwnRequest(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *server) {
		res := s.do("POST", "/scim/v2/Bulk", `{`+bulkSchema+`,"Operations":[
			{"method":"POST","path":"/Users","bulkId":"ada","data":{`+userSchema+`,"userName":"ada@example.com"}},
			{"method":"PATCH","path":"/Users/bulkId:ada","data":{`+patchSchema+`,"Operations":[{"op":"replace","path":"displayName","value":"Ada"}]}},
			{"method":"POST","path":"/Users","bulkId":"again","data":{`+userSchema+`,"userName":"ADA@example.com"}},
			{"method":"DELETE","path":"/Users/bulkId:nobody"},
			{"method":"GET","path":"/Users"}]}`).want(t, http.StatusOK)
		ops, _ := res.body["Operations"].([]any)
		if len(ops) != 5 {
			t.Fatalf("%d results, want 5: %s", len(ops), res.raw)
		}
		for i, want := range []string{"201", "200", "409", "409", "400"} {
			if got := str(ops[i], "status"); got != want {
				t.Errorf("operation %d: status %q, want %q: %v", i, got, want, ops[i])
			}
		}
		if str(ops[0], "bulkId") != "ada" || !strings.HasSuffix(str(ops[0], "location"), "/scim/v2/Users/"+idOf(str(ops[0], "location"))) ||
			!strings.HasPrefix(str(ops[0], "version"), `W/"`) {
			t.Errorf("the create's result: %v", ops[0])
		}
		if str(ops[2], "response.scimType") != "uniqueness" {
			t.Errorf("the clash's response: %v", ops[2])
		}
		id := idOf(str(ops[0], "location"))
		if got := str(s.do("GET", "/scim/v2/Users/"+id, "").want(t, http.StatusOK).body, "displayName"); got != "Ada" {
			t.Errorf("the PATCH by bulkId left displayName %q", got)
		}

		stopped := s.do("POST", "/scim/v2/Bulk", `{`+bulkSchema+`,"failOnErrors":1,"Operations":[
			{"method":"POST","path":"/Users","bulkId":"dup","data":{`+userSchema+`,"userName":"ada@example.com"}},
			{"method":"POST","path":"/Users","bulkId":"never","data":{`+userSchema+`,"userName":"never@example.com"}}]}`).want(t, http.StatusOK)
		if ops, _ := stopped.body["Operations"].([]any); len(ops) != 1 {
			t.Errorf("failOnErrors 1 ran %d operations, want 1: %s", len(ops), stopped.raw)
		}
		never := s.do("GET", filterQuery(`userName eq "never@example.com"`), "").want(t, http.StatusOK)
		if str(never.body, "totalResults") != "0" {
			t.Errorf("an operation after failOnErrors ran: %s", never.raw)
		}

		var many []string
		for i := range 1001 {
			many = append(many, fmt.Sprintf(`{"method":"DELETE","path":"/Users/%d"}`, i+1))
		}
		s.do("POST", "/scim/v2/Bulk", `{`+bulkSchema+`,"Operations":[`+strings.Join(many, ",")+`]}`).wantError(t, http.StatusRequestEntityTooLarge, "")
		if got := str(s.do("GET", "/scim/v2/Users/"+id, "").body, "id"); got != id {
			t.Errorf("a refused bulk request deleted user %s", id)
		}
	})
}

// idOf is the id at the end of a user's location.
func idOf(location string) string {
	return location[strings.LastIndex(location, "/")+1:]
}

// TestEachBulkOperationTakesItsCallersRate: a bulk request of many writes is held to the rate
// limit as many requests would be: the operations beyond the caller's tokens are 429.
func TestEachBulkOperationTakesItsCallersRate(t *testing.T) {
	s := startServerWith(t, t.TempDir()+"/users.db", handlers.Config{RateLimit: 0.1, RateBurst: 4})
	var ops []string
	for i := range 10 {
		ops = append(ops, fmt.Sprintf(`{"method":"POST","path":"/Users","bulkId":"u%d","data":{%s,"userName":"rate%d"}}`, i, userSchema, i))
	}
	res := s.do("POST", "/scim/v2/Bulk", `{`+bulkSchema+`,"Operations":[`+strings.Join(ops, ",")+`]}`).want(t, http.StatusOK)
	results, _ := res.body["Operations"].([]any)
	counts := map[string]int{}
	for _, r := range results {
		counts[str(r, "status")]++
	}
	// The bulk request took one token of four; its operations the other three.
	if counts["201"] != 3 || counts["429"] != 7 {
		t.Errorf("operation statuses %v, want 3 created and 7 refused for the rate", counts)
	}
}

// TestABulkRequestNamesEachBulkIDOnce: a bulkId given twice is refused whole.
func TestABulkRequestNamesEachBulkIDOnce(t *testing.T) {
	s := startServer(t, t.TempDir()+"/users.db")
	s.do("POST", "/scim/v2/Bulk", `{`+bulkSchema+`,"Operations":[
		{"method":"POST","path":"/Users","bulkId":"a","data":{`+userSchema+`,"userName":"one"}},
		{"method":"POST","path":"/Users","bulkId":"a","data":{`+userSchema+`,"userName":"two"}}]}`).wantError(t, http.StatusBadRequest, "invalidValue")
	if total := str(s.do("GET", "/scim/v2/Users", "").body, "totalResults"); total != "0" {
		t.Errorf("a refused bulk request created %s users", total)
	}
}
