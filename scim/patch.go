package scim

import (
	"cmp"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	filter "github.com/scim2/filter-parser/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/users"
)

// maxPatchOperations bounds the operations of one PATCH.
const maxPatchOperations = 1000

// patchRequest is the body of a PATCH (RFC 7644 section 3.5.2).
type patchRequest struct {
	Schemas    []string    `json:"schemas"`
	Operations []operation `json:"Operations"`
}

type operation struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// patchRetries is how many times a PATCH reads the user again and reapplies its operations when
// another write changed the user between its read and its write.
const patchRetries = 3

// patchUser applies the operations to the user as it is, and writes the fields that changed, on
// the condition that the user is still the version it read, which If-Match, when sent, must name:
// the operations apply as one, or not at all. Operations that change nothing write nothing, so that
// meta.lastModified stays.
func (f *face) patchUser(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	var in patchRequest
	if err := readBody(w, r, &in); err != nil {
		f.fail(w, r, err)
		return
	}
	if !hasSchema(in.Schemas, schemaPatchOp) {
		f.fail(w, r, refuse(typeInvalidValue, "schemas must hold %s", schemaPatchOp))
		return
	}
	if len(in.Operations) == 0 || len(in.Operations) > maxPatchOperations {
		f.fail(w, r, refuse(typeInvalidValue, "a PATCH holds 1 to %d operations, not %d", maxPatchOperations, len(in.Operations)))
		return
	}
	ctx := call(r)
	var precondition *users.EntityTags // If-Match, when the request sent one
	if value := ifMatch(r); value != "" {
		tags, err := users.ParseEntityTags(value)
		if err != nil {
			f.fail(w, r, err)
			return
		}
		precondition = &tags
	}
	for attempt := 1; ; attempt++ {
		current, err := f.svc.GetUser(ctx, &usersv1.GetUserRequest{Id: id})
		if err != nil {
			f.fail(w, r, err)
			return
		}
		if precondition != nil && !precondition.HoldsStrong(current.GetEtag()) {
			f.fail(w, r, &Error{Status: http.StatusPreconditionFailed, Detail: "the user is not at the version If-Match names; it is at " + version(current)})
			return
		}
		next := proto.CloneOf(current)
		for i, op := range in.Operations {
			if err := apply(next, op); err != nil {
				var e *Error
				if errors.As(err, &e) {
					e.Detail = "Operations[" + strconv.Itoa(i) + "]: " + e.Detail
				}
				f.fail(w, r, err)
				return
			}
		}
		mask := changedFields(current, next)
		if len(mask) == 0 {
			answerUser(w, r, http.StatusOK, current, projection{})
			return
		}
		// The write holds only if the user is still the version the operations applied to.
		res, err := f.svc.UpdateUser(ctx, &usersv1.UpdateUserRequest{Id: id, User: next,
			UpdateMask: &fieldmaskpb.FieldMask{Paths: mask}, Etag: current.GetEtag()})
		var ue *users.Error
		if err != nil && errors.As(err, &ue) && ue.Reason() == users.ReasonEtagMismatch {
			if attempt < patchRetries {
				// Another write came between the read and this one: apply the operations to what
				// it left, unless If-Match named the version before it (the next read says so).
				continue
			}
			f.fail(w, r, &Error{Status: http.StatusConflict,
				Detail: "the user changed under each of " + strconv.Itoa(patchRetries) + " attempts to apply the operations; send the PATCH again"})
			return
		}
		if err != nil {
			f.fail(w, r, err)
			return
		}
		answerUser(w, r, http.StatusOK, res.GetUser(), projection{})
		return
	}
}

// changedFields are the update_mask paths of the fields in which next differs from current.
func changedFields(current, next *usersv1.User) []string {
	var mask []string
	for _, c := range []struct {
		path    string
		changed bool
	}{
		{"name", current.GetName() != next.GetName()},
		{"role", current.GetRole() != next.GetRole()},
		{"user_name", current.GetUserName() != next.GetUserName()},
		{"given_name", current.GetGivenName() != next.GetGivenName()},
		{"family_name", current.GetFamilyName() != next.GetFamilyName()},
		{"email", current.GetEmail() != next.GetEmail()},
		{"external_id", current.GetExternalId() != next.GetExternalId()},
		{"active", (current.Active == nil || current.GetActive()) != (next.Active == nil || next.GetActive())},
	} {
		if c.changed {
			mask = append(mask, c.path)
		}
	}
	return mask
}

// unkeptAttributes are the attributes of RFC 7643's User that usersd does not keep: an operation
// on one of them is accepted and changes nothing, as for an attribute a client sends on a create.
var unkeptAttributes = []string{"nickname", "profileurl", "title", "usertype", "preferredlanguage", "locale", "timezone",
	"password", "phonenumbers", "ims", "photos", "addresses", "groups", "entitlements", "x509certificates",
	"name.middlename", "name.honorificprefix", "name.honorificsuffix"}

// extensionPrefix starts the URN of every extension schema, such as the enterprise user's
// (urn:ietf:params:scim:schemas:extension:enterprise:2.0:User): usersd keeps none, so that an
// operation on one is accepted and changes nothing, as its attributes on a create are ignored.
const extensionPrefix = "urn:ietf:params:scim:schemas:extension:"

// objectOrder is the order in which the attributes of an operation without a path apply, so that
// the outcome does not depend on the order of a JSON object's members: the userName, which a
// derived name follows, first, then the name, then the displayName, which sets the name last.
var objectOrder = map[string]int{"username": 1, "name": 2, "name.formatted": 3, "displayname": 4}

// apply applies one operation to u.
func apply(u *usersv1.User, op operation) error {
	kind := strings.ToLower(op.Op)
	if kind != "add" && kind != "replace" && kind != "remove" {
		return refuse(typeInvalidValue, "op is add, replace or remove, not %q", op.Op)
	}
	if strings.TrimSpace(op.Path) != "" {
		return applyPath(u, kind, op)
	}
	if kind == "remove" {
		return refuse(typeNoTarget, "a remove needs a path")
	}
	// No path: the value is an object of attributes, each added or replaced as if it were the
	// path. A member's name is always a path, never another object without one.
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(op.Value, &attrs); err != nil {
		return refuse(typeInvalidValue, "an operation without a path takes an object of attributes")
	}
	names := slices.Collect(maps.Keys(attrs))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(objectOrder[strings.ToLower(a)], objectOrder[strings.ToLower(b)]), strings.Compare(a, b))
	})
	for _, name := range names {
		switch {
		case strings.TrimSpace(name) == "":
			return refuse(typeInvalidPath, "an operation without a path takes an object whose members are attributes, not %q", name)
		case strings.EqualFold(name, "schemas"), hasPrefixFold(name, extensionPrefix):
			continue
		}
		if err := applyPath(u, kind, operation{Op: op.Op, Path: name, Value: attrs[name]}); err != nil {
			return err
		}
	}
	return nil
}

// hasPrefixFold reports whether s starts with prefix, ignoring case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// applyPath applies an operation with a path: kind is its op in lower case.
func applyPath(u *usersv1.User, kind string, op operation) error {
	if hasPrefixFold(op.Path, extensionPrefix) {
		return nil
	}
	path, err := filter.ParsePath([]byte(op.Path))
	if err != nil {
		return refuse(typeInvalidPath, "%q is not a SCIM path: %v", op.Path, err)
	}
	if uri := path.AttributePath.URI(); uri != "" && !strings.EqualFold(uri, schemaUser) {
		return refuse(typeInvalidPath, "%q: usersd's users have the core User schema and ignore extensions", op.Path)
	}
	name := strings.ToLower(path.AttributePath.AttributeName)
	if sub := path.AttributePath.SubAttributeName(); sub != "" {
		name += "." + strings.ToLower(sub)
	}
	if slices.Contains(unkeptAttributes, name) || slices.Contains(unkeptAttributes, strings.SplitN(name, ".", 2)[0]) {
		return nil
	}
	if path.ValueExpression != nil {
		return applyValuePath(u, kind, name, path, op)
	}
	switch name {
	case "id", "meta", "schemas", "meta.created", "meta.lastmodified", "meta.location", "meta.version", "meta.resourcetype":
		return refuse(typeMutability, "%s is read-only", op.Path)
	case "username":
		if kind == "remove" {
			return refuse(typeMutability, "userName is required: it can be replaced, not removed")
		}
		var userName string
		if json.Unmarshal(op.Value, &userName) != nil || strings.TrimSpace(userName) == "" {
			return refuse(typeInvalidValue, "userName takes a string that is not empty: it can be replaced, not removed")
		}
		keepHiddenName(u, userName)
		u.UserName = userName
		return nil
	case "externalid":
		return setOrRemove(op, kind, &u.ExternalId)
	case "displayname", "name.formatted":
		if kind == "remove" {
			// usersd's users always have a name: without a displayName, the userName stands in,
			// and is not shown as one.
			if u.Name = u.GetUserName(); u.Name == "" {
				return refuse(typeMutability, "a user without a userName keeps its displayName")
			}
			return nil
		}
		return setString(op, func(s string) { u.Name = s })
	case "name.givenname":
		return setOrRemove(op, kind, &u.GivenName)
	case "name.familyname":
		return setOrRemove(op, kind, &u.FamilyName)
	case "name":
		if kind == "remove" {
			u.GivenName, u.FamilyName = "", ""
			return nil
		}
		var n nameIn
		if err := json.Unmarshal(op.Value, &n); err != nil {
			return refuse(typeInvalidValue, "name takes an object of givenName, familyName and formatted")
		}
		if n.GivenName != nil {
			u.GivenName = *n.GivenName
		}
		if n.FamilyName != nil {
			u.FamilyName = *n.FamilyName
		}
		if n.Formatted != nil && *n.Formatted != "" {
			u.Name = *n.Formatted
		}
		return nil
	case "active":
		if kind == "remove" {
			u.Active = proto.Bool(true)
			return nil
		}
		var b looseBool
		if err := json.Unmarshal(op.Value, &b); err != nil {
			return refuse(typeInvalidValue, "active takes a boolean")
		}
		u.Active = proto.Bool(bool(b))
		return nil
	case "emails", "roles":
		field := &u.Email
		if name == "roles" {
			field = &u.Role
		}
		if kind == "remove" {
			*field = ""
			return nil
		}
		var values []multiValue
		if err := json.Unmarshal(op.Value, &values); err != nil {
			var one multiValue // some clients send one value rather than a list of one
			if json.Unmarshal(op.Value, &one) != nil {
				return refuse(typeInvalidValue, "%s takes a list of values", op.Path)
			}
			values = []multiValue{one}
		}
		// usersd keeps one value: an add keeps the one there unless the new one is primary.
		if kind == "add" && *field != "" && !slices.ContainsFunc(values, func(v multiValue) bool { return bool(v.Primary) }) {
			return nil
		}
		*field = chosen(values)
		return nil
	case "emails.value":
		return setOrRemove(op, kind, &u.Email)
	case "roles.value":
		return setOrRemove(op, kind, &u.Role)
	}
	return refuse(typeInvalidPath, "%q is not an attribute of usersd's users", op.Path)
}

// keepHiddenName keeps a user named by its userName so when the userName changes: the name was
// never given as a displayName, and follows the userName.
func keepHiddenName(u *usersv1.User, userName string) {
	if u.GetName() == u.GetUserName() {
		u.Name = userName
	}
}

// applyValuePath applies an operation whose path filters the values of emails or roles, such as
// Entra ID's emails[type eq "work"].value. usersd keeps one value of each, whose type is work and
// which is primary; a filter that the value does not meet has no target.
func applyValuePath(u *usersv1.User, kind, name string, path filter.Path, op operation) error {
	field := &u.Email
	switch name {
	case "emails":
	case "roles":
		field = &u.Role
	default:
		return refuse(typeInvalidPath, "%q: usersd filters the values of emails and roles only", op.Path)
	}
	matched, err := valueMatches(path.ValueExpression, *field)
	if err != nil {
		return err
	}
	matched = matched && *field != "" // no value: nothing for the filter to select
	// An add to a list that holds no value yet adds the first one: Entra ID adds a user's work
	// email this way.
	if !matched && !(kind == "add" && *field == "") {
		return refuse(typeNoTarget, "%q matches no value of the user's", op.Path)
	}
	sub := strings.ToLower(path.SubAttributeName())
	switch {
	case kind == "remove" && (sub == "" || sub == "value"):
		*field = ""
		return nil
	case sub == "value":
		return setString(op, func(s string) { *field = s })
	case sub == "":
		var v multiValue
		if err := json.Unmarshal(op.Value, &v); err != nil {
			return refuse(typeInvalidValue, "%s takes a value object", op.Path)
		}
		*field = v.Value
		return nil
	case sub == "type" || sub == "primary" || sub == "display":
		return nil // always work, always primary
	}
	return refuse(typeInvalidPath, "%q: %s has no sub-attribute %s", op.Path, name, sub)
}

// valueMatches reports whether the one value usersd keeps (value, of type work, primary) meets a
// value filter.
func valueMatches(expr filter.Expression, value string) (bool, error) {
	switch e := expr.(type) {
	case *filter.LogicalExpression:
		l, err := valueMatches(e.Left, value)
		if err != nil {
			return false, err
		}
		r, err := valueMatches(e.Right, value)
		if err != nil {
			return false, err
		}
		if e.Operator == filter.OR {
			return l || r, nil
		}
		return l && r, nil
	case *filter.NotExpression:
		m, err := valueMatches(e.Expression, value)
		return !m, err
	case *filter.AttributeExpression:
		var have any
		switch strings.ToLower(e.AttributePath.AttributeName) {
		case "value":
			if value == "" {
				return false, nil
			}
			have = value
		case "type":
			have = "work"
		case "primary":
			have = true
		default:
			return false, refuse(typeInvalidFilter, "%v is not a sub-attribute usersd keeps", e.AttributePath)
		}
		switch strings.ToLower(string(e.Operator)) {
		case "pr":
			return true, nil
		case "eq", "ne":
			var equal bool
			switch h := have.(type) {
			case string:
				s, ok := e.CompareValue.(string)
				equal = ok && strings.EqualFold(h, s)
			case bool:
				b, ok := looseBoolOf(e.CompareValue)
				equal = ok && b == h
			}
			return equal == strings.EqualFold(string(e.Operator), "eq"), nil
		}
		return false, refuse(typeInvalidFilter, "a value filter compares with eq, ne or pr, not %s", e.Operator)
	}
	return false, refuse(typeInvalidFilter, "%v is not a value filter usersd knows", expr)
}

// looseBoolOf is a filter's literal as a boolean: true and false, or Entra ID's "True" and "False".
func looseBoolOf(v any) (bool, bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case string:
		switch strings.ToLower(v) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	return false, false
}

// setString sets a string attribute from an operation's value.
func setString(op operation, set func(string)) error {
	var s string
	if err := json.Unmarshal(op.Value, &s); err != nil {
		return refuse(typeInvalidValue, "%s takes a string", op.Path)
	}
	set(s)
	return nil
}

// setOrRemove sets a string attribute from an add or replace, or clears it on a remove.
func setOrRemove(op operation, kind string, field *string) error {
	if kind == "remove" {
		*field = ""
		return nil
	}
	return setString(op, func(s string) { *field = s })
}
