package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"usersd/bench/internal/fixture"
)

// The SCIM scenarios: what an identity provider asks of usersd, at each size and backend, each
// compared with itself at 1,000 users. The look-up by userName before every create and update,
// spread over the collection as the get scenario is; and a PATCH of one user's given name (which
// no other scenario's answer reads), by one client, since an identity provider's changes of one
// user come one at a time.

// scimLookupPath is the look-up of the user with id {id} by userName, as Entra ID sends it.
var scimLookupPath = "/scim/v2/Users?filter=" + url.QueryEscape(`userName eq "user{id}"`) + "&startIndex=1&count=1"

// scimPatchBody changes the given name to a value no request had before, so that every PATCH writes.
const scimPatchBody = `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],` +
	`"Operations":[{"op":"Replace","path":"name.givenName","value":"Bench {seq}"}]}`

func scimScenarios(n int, b backend, size string, againstSmall func(kind string, target float64, note string) []comparison) []scenario {
	ids, step := min(n, spreadIDs), max(1, n/spreadIDs)
	mid := midUser(n)
	patchPath := fmt.Sprintf("/scim/v2/Users/%d", mid.ID)
	return []scenario{
		{id: scaleID("scim-lookup", n, b),
			label: fmt.Sprintf("usersd SCIM GET /scim/v2/Users?filter=userName eq … (%s users 1..%s), %s", fmtCount(float64(ids)), fmtCount(float64(ids*step)), size),
			load:  wrkLoad{conns: 16, path: scimLookupPath, ids: ids, step: step, key: true},
			check: checkSCIMLookup(mid), compares: againstSmall("scim-lookup", 2, "")},
		{id: scaleID("scim-patch", n, b), label: "usersd SCIM PATCH " + patchPath + " (name.givenName), 1 conn, " + size,
			load:  wrkLoad{conns: 1, method: http.MethodPatch, path: patchPath, body: scimPatchBody, key: true, countStatus: true},
			check: checkSCIMLookup(mid), compares: againstSmall("scim-patch", 2, ""), writes: true},
	}
}

// checkSCIMLookup: the look-up of the middle user by its userName, ignoring case, answers that user
// alone, with the exact total.
func checkSCIMLookup(mid fixture.User) func(*runner, string) error {
	return func(_ *runner, addr string) error {
		path := "/scim/v2/Users?filter=" + url.QueryEscape(fmt.Sprintf(`userName eq "USER%d"`, mid.ID)) + "&startIndex=1&count=1"
		_, body, err := fetch("GET", "http://"+addr+path, "", http.Header{"X-Api-Key": {apiKey}})
		if err != nil {
			return err
		}
		var list struct {
			TotalResults int `json:"totalResults"`
			Resources    []struct {
				ID       string `json:"id"`
				UserName string `json:"userName"`
			} `json:"Resources"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return err
		}
		if list.TotalResults != 1 || len(list.Resources) != 1 || list.Resources[0].ID != fmt.Sprint(mid.ID) || list.Resources[0].UserName != mid.UserName() {
			return fmt.Errorf("SCIM look-up of %s: %s", mid.UserName(), body)
		}
		return nil
	}
}
