// The identity fields of a user (user_name, given_name, family_name, email, external_id, active,
// labels): their rules, and their way between the wire message and the store.
package users

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
)

// Limits of the identity fields, in bytes unless said otherwise: user_name and email as the
// contract sets them (an email's 254 is what SMTP carries in a path), the others chosen to keep a
// user small.
const (
	maxUserNameBytes   = 256
	maxPersonNameChars = 200 // given_name and family_name, as name
	maxEmailBytes      = 254
	maxExternalIDBytes = 256
	maxLabelValueBytes = 256
)

// labelKey is what a label's key looks like: short, lower case, safe in a URL, a field mask path
// and a metric.
var labelKey = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,62}$`)

// checkIdentity checks the identity fields of a user that is created or replaced.
func checkIdentity(user *usersv1.User) error {
	checks := []error{
		checkUserName(user.GetUserName()),
		checkLine("given_name", user.GetGivenName(), maxPersonNameChars),
		checkLine("family_name", user.GetFamilyName(), maxPersonNameChars),
		checkEmail(user.GetEmail()),
		checkExternalID(user.GetExternalId()),
		checkLabels(user.GetLabels()),
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkUserName: empty (none), or 1 to 256 bytes of UTF-8 without control characters, and without
// space at either end, which would make two names that look alike differ.
func checkUserName(v string) error {
	if v == "" {
		return nil
	}
	if err := checkBytes("user_name", v, maxUserNameBytes); err != nil {
		return err
	}
	first, _ := utf8.DecodeRuneInString(v)
	last, _ := utf8.DecodeLastRuneInString(v)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return InvalidField("user_name", "user_name must not start or end with a space")
	}
	return nil
}

// checkEmail: empty (none), or at most 254 bytes with one "@", something on each side of it, and
// no space. It checks the shape only: whether the mailbox exists is for whoever sends it mail.
func checkEmail(v string) error {
	if v == "" {
		return nil
	}
	if err := checkBytes("email", v, maxEmailBytes); err != nil {
		return err
	}
	if strings.ContainsFunc(v, unicode.IsSpace) {
		return InvalidField("email", "email must not contain spaces")
	}
	local, domain, ok := strings.Cut(v, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") {
		return InvalidField("email", "email must be one @ with something on each side, such as ada@example.com")
	}
	return nil
}

// checkExternalID: empty (none), or at most 256 bytes of UTF-8 without control characters.
func checkExternalID(v string) error {
	if v == "" {
		return nil
	}
	return checkBytes("external_id", v, maxExternalIDBytes)
}

// checkLabels checks every label of a whole map: its number, each key and each value.
func checkLabels(labels map[string]string) error {
	if len(labels) > store.MaxLabels {
		return InvalidField("labels", "labels holds %d labels; at most %d are allowed", len(labels), store.MaxLabels)
	}
	for _, key := range slices.Sorted(maps.Keys(labels)) { // the first in order, whatever the map's
		if err := checkLabel(key, labels[key]); err != nil {
			return err
		}
	}
	return nil
}

// checkLabel checks one label. A bad key is named by the map (its text may be anything); a bad
// value by its key, as labels[key].
func checkLabel(key, value string) error {
	if err := checkLabelKey(key); err != nil {
		return err
	}
	return checkBytes("labels["+key+"]", value, maxLabelValueBytes)
}

// CheckLabelKey checks the key of a label, for a face that reads labels key by key.
func CheckLabelKey(key string) error { return checkLabelKey(key) }

func checkLabelKey(key string) error {
	if !labelKey.MatchString(key) {
		return InvalidField("labels", "labels: the key %s must be 1 to 63 characters of a-z, 0-9, _, . and -, starting with a letter", strconv.Quote(key))
	}
	return nil
}

// checkBytes checks a value measured in bytes: not too long, UTF-8, no control characters.
func checkBytes(field, v string, maxBytes int) error {
	if len(v) > maxBytes {
		return InvalidField(field, "%s is %d bytes long; at most %d are allowed", field, len(v), maxBytes)
	}
	if !utf8.ValidString(v) {
		return InvalidField(field, "%s must be UTF-8 text", field)
	}
	if strings.ContainsFunc(v, unicode.IsControl) {
		return InvalidField(field, "%s must not contain control characters", field)
	}
	return nil
}

// identityOf is the identity that a created or replaced user gets: active unless set false.
func identityOf(user *usersv1.User) store.Identity {
	return store.Identity{
		UserName: user.GetUserName(), GivenName: user.GetGivenName(), FamilyName: user.GetFamilyName(),
		Email: user.GetEmail(), ExternalID: user.GetExternalId(),
		Inactive: user.Active != nil && !user.GetActive(), Labels: user.GetLabels(),
	}
}

// identityChanges are the changes that replace every identity field of a user with identity's.
func identityChanges(changes *store.UserChanges, identity store.Identity) {
	changes.UserName, changes.GivenName, changes.FamilyName = &identity.UserName, &identity.GivenName, &identity.FamilyName
	changes.Email, changes.ExternalID, changes.Inactive = &identity.Email, &identity.ExternalID, &identity.Inactive
	labels := identity.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	changes.Labels = &labels
}

// identityHash is what the identity of a created user adds to its request's hash (requestHash):
// nothing for a user with none, so that the repeat of a create by an older client, or one made
// before the identity fields were, has the hash it had.
func identityHash(id store.Identity) []string {
	if id.UserName == "" && id.GivenName == "" && id.FamilyName == "" && id.Email == "" && id.ExternalID == "" &&
		!id.Inactive && len(id.Labels) == 0 {
		return nil
	}
	fields := []string{"identity", id.UserName, id.GivenName, id.FamilyName, id.Email, id.ExternalID, strconv.FormatBool(!id.Inactive)}
	for _, key := range slices.Sorted(maps.Keys(id.Labels)) {
		fields = append(fields, key, id.Labels[key])
	}
	return fields
}

// setIdentity sets the identity fields of m from u; active is always set, so that a reader sees it.
func setIdentity(m *usersv1.User, u store.Identity) {
	m.UserName, m.GivenName, m.FamilyName = u.UserName, u.GivenName, u.FamilyName
	m.Email, m.ExternalId, m.Active = u.Email, u.ExternalID, proto.Bool(!u.Inactive)
	if len(u.Labels) > 0 {
		m.Labels = maps.Clone(u.Labels)
	}
}
