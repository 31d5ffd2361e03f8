// Field masks: which fields of a user an UpdateUser request sets (AIP-134).
package users

import (
	"strings"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

// outputOnlyUserFields are ignored in an update mask, as their values are ignored in a body.
var outputOnlyUserFields = map[string]bool{
	"id": true, "created_at": true, "updated_at": true, "etag": true, "delete_time": true, "purge_time": true,
}

// writableUserFields are the fields an update mask may name, as "*" names them all.
var writableUserFields = []string{"name", "role", "user_name", "given_name", "family_name", "email", "external_id", "active", "labels"}

// IsOutputOnlyUserField reports whether the field of User that name names (its proto name) is
// output only: ignored in a body and in an update mask.
func IsOutputOnlyUserField(name string) bool { return outputOnlyUserFields[name] }

// userChanges reads the changes that user and mask ask for. A nil mask means every field that user
// populates; "*" means every writable field; an empty mask means none. "labels.KEY" names one
// label: set from user.labels, or removed when user.labels has no such key.
func userChanges(user *usersv1.User, mask *fieldmaskpb.FieldMask) (store.UserChanges, error) {
	set := map[string]bool{}
	if mask == nil {
		set["name"], set["role"] = user.GetName() != "", user.GetRole() != ""
		set["user_name"], set["given_name"], set["family_name"] = user.GetUserName() != "", user.GetGivenName() != "", user.GetFamilyName() != ""
		set["email"], set["external_id"] = user.GetEmail() != "", user.GetExternalId() != ""
		set["active"], set["labels"] = user != nil && user.Active != nil, len(user.GetLabels()) > 0
	}
	var changes store.UserChanges
	for _, path := range mask.GetPaths() {
		if key, ok := strings.CutPrefix(path, "labels."); ok {
			if err := labelChange(&changes, user, key); err != nil {
				return store.UserChanges{}, err
			}
			continue
		}
		switch {
		case path == "*":
			for _, f := range writableUserFields {
				set[f] = true
			}
		case isWritableUserField(path):
			set[path] = true
		case outputOnlyUserFields[path]:
		default:
			return store.UserChanges{}, InvalidField("update_mask",
				"update_mask: %q is not a field of User; use %s, labels.KEY or *", path, strings.Join(writableUserFields, ", "))
		}
	}
	if set["labels"] {
		// A whole map named with some of its keys as well: the map wins, and is checked whole.
		if err := checkLabels(user.GetLabels()); err != nil {
			return store.UserChanges{}, err
		}
		labels := map[string]string{}
		for k, v := range user.GetLabels() {
			labels[k] = v
		}
		changes.Labels, changes.LabelChanges = &labels, nil
	}
	return changes, setUserFields(&changes, user, set)
}

// labelChange adds the change of the one label that the mask path labels.KEY names.
func labelChange(changes *store.UserChanges, user *usersv1.User, key string) error {
	if err := checkLabelKey(key); err != nil {
		return InvalidField("update_mask", "update_mask: %q does not name a label: %v", "labels."+key, err)
	}
	if changes.LabelChanges == nil {
		changes.LabelChanges = map[string]*string{}
	}
	value, ok := user.GetLabels()[key]
	if !ok {
		changes.LabelChanges[key] = nil
		return nil
	}
	if err := checkLabel(key, value); err != nil {
		return err
	}
	changes.LabelChanges[key] = &value
	return nil
}

// setUserFields checks and sets the scalar fields that set names.
func setUserFields(changes *store.UserChanges, user *usersv1.User, set map[string]bool) error {
	text := []struct {
		field string
		value string
		check func(string) error
		into  **string
	}{
		{"name", user.GetName(), func(v string) error { return checkRequiredText("name", v, maxNameLength) }, &changes.Name},
		{"role", user.GetRole(), func(v string) error { return checkLine("role", v, maxRoleLength) }, &changes.Role},
		{"user_name", user.GetUserName(), checkUserName, &changes.UserName},
		{"given_name", user.GetGivenName(), func(v string) error { return checkLine("given_name", v, maxPersonNameChars) }, &changes.GivenName},
		{"family_name", user.GetFamilyName(), func(v string) error { return checkLine("family_name", v, maxPersonNameChars) }, &changes.FamilyName},
		{"email", user.GetEmail(), checkEmail, &changes.Email},
		{"external_id", user.GetExternalId(), checkExternalID, &changes.ExternalID},
	}
	for _, f := range text {
		if !set[f.field] {
			continue
		}
		if err := f.check(f.value); err != nil {
			return err
		}
		*f.into = &f.value
	}
	if set["active"] {
		inactive := user != nil && user.Active != nil && !user.GetActive() // named and unset: back to the default
		changes.Inactive = &inactive
	}
	return nil
}

func isWritableUserField(path string) bool {
	for _, f := range writableUserFields {
		if f == path {
			return true
		}
	}
	return false
}
