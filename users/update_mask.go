// Field masks: which fields of a user an UpdateUser request sets (AIP-134).
package users

import (
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

// outputOnlyUserFields are ignored in an update mask, as their values are ignored in a body.
var outputOnlyUserFields = map[string]bool{"id": true, "created_at": true, "updated_at": true, "etag": true}

// IsOutputOnlyUserField reports whether the field of User that name names (its proto name) is
// output only: ignored in a body and in an update mask.
func IsOutputOnlyUserField(name string) bool { return outputOnlyUserFields[name] }

// userChanges reads the changes that user and mask ask for. A nil mask means every field that user
// populates; "*" means every writable field; an empty mask means none.
func userChanges(user *usersv1.User, mask *fieldmaskpb.FieldMask) (store.UserChanges, error) {
	var setName, setRole bool
	if mask == nil {
		setName, setRole = user.GetName() != "", user.GetRole() != ""
	}
	for _, path := range mask.GetPaths() {
		switch {
		case path == "name":
			setName = true
		case path == "role":
			setRole = true
		case path == "*":
			setName, setRole = true, true
		case outputOnlyUserFields[path]:
		default:
			return store.UserChanges{}, InvalidField("update_mask", "update_mask: %q is not a field of User; use name, role or *", path)
		}
	}
	var changes store.UserChanges
	if setName {
		name := user.GetName()
		if err := checkRequiredText("name", name, maxNameLength); err != nil {
			return store.UserChanges{}, err
		}
		changes.Name = &name
	}
	if setRole {
		role := user.GetRole()
		if err := checkLine("role", role, maxRoleLength); err != nil {
			return store.UserChanges{}, err
		}
		changes.Role = &role
	}
	return changes, nil
}
