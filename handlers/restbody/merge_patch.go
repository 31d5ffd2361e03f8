// JSON merge patch (RFC 7396) for users: a patch becomes the user and update mask of UpdateUser.
package restbody

import (
	"encoding/json"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/handlers/codec"
	"usersd/users"
)

// MergePatch reads a merge patch of a user. Every member it names goes into the mask: a value sets
// the field, null removes it (for role: the user has no role then; for active: it is true again).
// The fields are scalars, merged member by member, but for labels, merged key by key
// (merge_patch_labels.go). The mask is never nil, so an empty patch changes nothing.
func MergePatch(body []byte) (*usersv1.User, *fieldmaskpb.FieldMask, error) {
	user := &usersv1.User{}
	// Output-only members are ignored whatever their values; the id stays, for UpdateUser to compare.
	body = WithoutOutputOnly(body, user.ProtoReflect().Descriptor(), "id")
	body, labels, err := cutLabels(body)
	if err != nil {
		return nil, nil, err
	}
	members, err := decodePatch(body, user)
	if err != nil {
		return nil, nil, err
	}
	mask := &fieldmaskpb.FieldMask{Paths: []string{}}
	for field, value := range members {
		name := string(field.Name())
		if users.IsOutputOnlyUserField(name) {
			continue // ignored, as in every body; a conflicting id is still refused by UpdateUser
		}
		if string(value) == "null" && name == "name" {
			return nil, nil, users.InvalidField("name", "name cannot be removed: it is required")
		}
		mask.Paths = append(mask.Paths, name)
	}
	if err := labels.apply(user, mask); err != nil {
		return nil, nil, err
	}
	slices.Sort(mask.Paths)
	return user, mask, nil
}

// decodePatch decodes a merge patch into m with the strict codec, which checks types, unknown and
// repeated members, and that the patch is an object (a patch of another JSON type would replace the
// resource with something that is not one), and returns each member's value by the field it names.
func decodePatch(body []byte, m proto.Message) (map[protoreflect.FieldDescriptor]json.RawMessage, error) {
	if err := codec.UnmarshalJSON(body, m); err != nil {
		return nil, users.InvalidField("body", "%v", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(body, &members); err != nil {
		return nil, fmt.Errorf("re-read a merge patch that protojson accepted: %w", err)
	}
	fields := m.ProtoReflect().Descriptor().Fields()
	out := make(map[protoreflect.FieldDescriptor]json.RawMessage, len(members))
	for member, value := range members {
		field := fieldByJSONMember(fields, member)
		if field == nil {
			return nil, fmt.Errorf("merge patch member %q accepted by protojson but not found", member)
		}
		out[field] = value
	}
	return out, nil
}

// fieldByJSONMember finds a field the way protojson does: by its JSON name or its proto name.
func fieldByJSONMember(fields protoreflect.FieldDescriptors, member string) protoreflect.FieldDescriptor {
	if f := fields.ByJSONName(member); f != nil {
		return f
	}
	return fields.ByTextName(member)
}
