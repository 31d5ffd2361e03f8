package restbody

import (
	"testing"

	usersv1 "usersd/gen/users/v1"
)

// TestWithoutOutputOnlyInList: each item's user loses its output-only members, whatever their
// values; everything else, duplicates and trailing data included, reaches the codec as it was
// sent, and a body of another shape is left alone.
func TestWithoutOutputOnlyInList(t *testing.T) {
	md := (&usersv1.BatchCreateUsersRequest{}).ProtoReflect().Descriptor()
	for _, c := range []struct{ body, want string }{
		{`{"requests":[{"user":{"name":"Ada","id":"x","createdAt":false}},{"user":{"etag":7,"name":"Bob"},"requestId":""}]}`,
			`{"requests":[{"user":{"name":"Ada"}},{"user":{"name":"Bob"},"requestId":""}]}`},
		{`{"requests":[{"user":{"name":"Ada","id":1}}],"requests":[]}`, `{"requests":[{"user":{"name":"Ada"}}],"requests":[]}`},
		{`{"requests":[{"user":{"name":"Ada","id":1},"user":{"name":"Bob"}}]}`, `{"requests":[{"user":{"name":"Ada"},"user":{"name":"Bob"}}]}`},
		{`{"requests":[{"user":{"name":"Ada","id":1}}]} trailing`, `{"requests":[{"user":{"name":"Ada"}}]} trailing`},
		{`{"requests":[{"user":{"name":"Ada"}}]}`, `{"requests":[{"user":{"name":"Ada"}}]}`},
		{`{"requests":null,"id":1}`, `{"requests":null,"id":1}`},
		{`{"requests":[{"user":{"id":1}},[]]}`, `{"requests":[{"user":{"id":1}},[]]}`},
		{`{"requests":[{"user":{"id":1}}`, `{"requests":[{"user":{"id":1}}`},
		{`["id"]`, `["id"]`},
	} {
		if got := string(WithoutOutputOnlyInList([]byte(c.body), md, "requests", "user")); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.body, got, c.want)
		}
	}
}
