package restbody

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	usersv1 "usersd/gen/users/v1"
	"usersd/users"
)

// TestMergePatch reads patches as RFC 7396 says, with the contract's fields: each member named goes
// into the mask, null removes, labels merge key by key, output-only members are ignored, and what
// is not a patch of a user is a client's error naming the field.
func TestMergePatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		mask   []string
		user   *usersv1.User
		labels map[string]string
		field  string // when the patch is refused: the field the error names
	}{
		{name: "an empty patch changes nothing", body: `{}`, mask: []string{}, user: &usersv1.User{}},
		{name: "a member sets its field", body: `{"role":"admin","userName":"ada"}`, mask: []string{"role", "user_name"},
			user: &usersv1.User{Role: "admin", UserName: "ada"}},
		{name: "null removes a field", body: `{"role":null}`, mask: []string{"role"}, user: &usersv1.User{}},
		{name: "the proto name reads as the JSON name", body: `{"given_name":"Ada"}`, mask: []string{"given_name"},
			user: &usersv1.User{GivenName: "Ada"}},
		{name: "output-only members are ignored, malformed or not", body: `{"createdAt":"","etag":7,"name":"x"}`,
			mask: []string{"name"}, user: &usersv1.User{Name: "x"}},
		{name: "the id stays, for UpdateUser to compare", body: `{"id":3}`, mask: []string{}, user: &usersv1.User{Id: 3}},
		{name: "labels merge key by key", body: `{"labels":{"team":"core","old":null}}`, mask: []string{"labels.old", "labels.team"},
			user: &usersv1.User{}, labels: map[string]string{"team": "core"}},
		{name: "null labels remove them all", body: `{"labels":null}`, mask: []string{"labels"}, user: &usersv1.User{}},
		{name: "the name cannot be removed", body: `{"name":null}`, field: "name"},
		{name: "an unknown member", body: `{"bogus":1}`, field: "body"},
		{name: "a patch that is not an object", body: `["x"]`, field: "body"},
		{name: "a label key out of the syntax", body: `{"labels":{"Bad":"x"}}`, field: "labels"},
		{name: "labels that are not an object", body: `{"labels":[1]}`, field: "labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user, mask, err := MergePatch([]byte(tc.body))
			if tc.field != "" {
				var ue *users.Error
				if !errors.As(err, &ue) || ue.Field() != tc.field {
					t.Fatalf("MergePatch(%s) = %v; want a client's error naming %q", tc.body, err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("MergePatch(%s): %v", tc.body, err)
			}
			if got := mask.GetPaths(); !slices.Equal(got, tc.mask) {
				t.Errorf("mask %q; want %q", got, tc.mask)
			}
			labels := user.GetLabels()
			user.Labels = nil
			if !proto.Equal(user, tc.user) || !maps.Equal(labels, tc.labels) {
				t.Errorf("user %v with labels %v; want %v with %v", user, labels, tc.user, tc.labels)
			}
		})
	}
}

// TestWithoutOutputOnly takes out only the output-only members, keeps the one bound to the path,
// and leaves a body that is not one JSON object for the codec to refuse.
func TestWithoutOutputOnly(t *testing.T) {
	md := (&usersv1.User{}).ProtoReflect().Descriptor()
	for body, want := range map[string]string{
		`{"name":"x","createdAt":"","updated_at":1}`: `{"name":"x"}`,
		`{"id":4,"etag":"e","name":"x","name":"y"}`:  `{"id":4,"name":"x","name":"y"}`,
		`{"name":"createdAt"}`:                       `{"name":"createdAt"}`,
		`[{"createdAt":1}]`:                          `[{"createdAt":1}]`,
		`{"createdAt":`:                              `{"createdAt":`,
	} {
		if got := string(WithoutOutputOnly([]byte(body), md, "id")); got != want {
			t.Errorf("WithoutOutputOnly(%s) = %s; want %s", body, got, want)
		}
	}
}
