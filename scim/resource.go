package scim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	usersv1 "usersd/gen/users/v1"
)

// resource is a User resource as SCIM writes it (RFC 7643 section 4.1), a map so that attributes
// and excludedAttributes can leave any of it out. usersd's one name is both displayName and
// name.formatted; its one email and one role are single-valued lists.
func resource(u *usersv1.User, base string) map[string]any {
	id := strconv.FormatInt(int64(u.GetId()), 10)
	name := map[string]any{}
	if u.GetGivenName() != "" {
		name["givenName"] = u.GetGivenName()
	}
	if u.GetFamilyName() != "" {
		name["familyName"] = u.GetFamilyName()
	}
	r := map[string]any{
		"schemas": []string{schemaUser},
		"id":      id,
		"active":  u.Active == nil || u.GetActive(),
		"meta": map[string]any{
			"resourceType": resourceTypeUserName,
			"created":      u.GetCreatedAt().AsTime().UTC().Format(time.RFC3339Nano),
			"lastModified": u.GetUpdatedAt().AsTime().UTC().Format(time.RFC3339Nano),
			"location":     base + Prefix + "/Users/" + id,
			"version":      version(u),
		},
	}
	// A user created over SCIM without a displayName is named by its userName, since usersd's
	// users always have a name; that name is not shown as a displayName the client never gave.
	if u.GetName() != u.GetUserName() {
		r["displayName"], name["formatted"] = u.GetName(), u.GetName()
	}
	if len(name) > 0 {
		r["name"] = name
	}
	if u.GetUserName() != "" {
		r["userName"] = u.GetUserName()
	}
	if u.GetExternalId() != "" {
		r["externalId"] = u.GetExternalId()
	}
	if u.GetEmail() != "" {
		r["emails"] = []any{map[string]any{"value": u.GetEmail(), "type": "work", "primary": true}}
	}
	if u.GetRole() != "" {
		r["roles"] = []any{map[string]any{"value": u.GetRole(), "primary": true}}
	}
	return r
}

// version is the user's entity tag as SCIM writes it, in meta.version and ETag: weak, as RFC 7644's
// examples are, since a SCIM client compares it only with If-Match and If-None-Match.
func version(u *usersv1.User) string { return "W/" + u.GetEtag() }

// baseURL is the scheme and host the client reached the service at, for meta.location and Location.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// userIn is a User resource as a client sends it. encoding/json matches the attribute names
// ignoring case, as SCIM's are (RFC 7643 section 2.1); attributes usersd does not keep are
// ignored, as are the read-only id and meta.
type userIn struct {
	Schemas     []string     `json:"schemas"`
	UserName    *string      `json:"userName"`
	ExternalID  *string      `json:"externalId"`
	DisplayName *string      `json:"displayName"`
	Name        *nameIn      `json:"name"`
	Active      *looseBool   `json:"active"`
	Emails      []multiValue `json:"emails"`
	Roles       []multiValue `json:"roles"`
}

type nameIn struct {
	Formatted  *string `json:"formatted"`
	GivenName  *string `json:"givenName"`
	FamilyName *string `json:"familyName"`
}

// multiValue is one value of a multi-valued attribute (emails, roles).
type multiValue struct {
	Value   string    `json:"value"`
	Type    string    `json:"type"`
	Primary looseBool `json:"primary"`
}

// looseBool is a boolean that identity providers also send as a string: Entra ID's "True" and
// "False".
type looseBool bool

func (b *looseBool) UnmarshalJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case bool:
		*b = looseBool(v)
		return nil
	case string:
		if parsed, err := strconv.ParseBool(strings.ToLower(v)); err == nil && (strings.EqualFold(v, "true") || strings.EqualFold(v, "false")) {
			*b = looseBool(parsed)
			return nil
		}
	}
	return fmt.Errorf("%s is not a boolean", data)
}

// chosen is the value of a multi-valued attribute that usersd keeps: the primary one, else the first.
func chosen(values []multiValue) string {
	for _, v := range values {
		if v.Primary {
			return v.Value
		}
	}
	if len(values) > 0 {
		return values[0].Value
	}
	return ""
}

// readBody decodes a request's JSON body, of at most MaxBodyBytes, into v, or refuses it as SCIM
// does: malformed JSON is invalidSyntax, a value of the wrong type invalidValue.
func readBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &Error{Status: http.StatusRequestEntityTooLarge, Detail: fmt.Sprintf("the body is larger than %d bytes", MaxBodyBytes)}
		}
		return refuse(typeInvalidSyntax, "cannot read the body: %v", err)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !jsonContent(ct) {
		return &Error{Status: http.StatusUnsupportedMediaType, Detail: "send application/scim+json or application/json, not " + ct}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return refuse(typeInvalidValue, "%s has a value of the wrong type: %s", typeErr.Field, typeErr.Value)
		}
		if strings.Contains(err.Error(), "is not a boolean") {
			return refuse(typeInvalidValue, "%v", err)
		}
		return refuse(typeInvalidSyntax, "the body is not a JSON object: %v", err)
	}
	if dec.More() {
		return refuse(typeInvalidSyntax, "the body holds more than one JSON value")
	}
	return nil
}

// jsonContent reports whether a Content-Type is SCIM's or plain JSON.
func jsonContent(ct string) bool {
	media, _, _ := strings.Cut(ct, ";")
	media = strings.ToLower(strings.TrimSpace(media))
	return media == ContentType || media == "application/json"
}

// hasSchema reports whether schemas names urn, ignoring case as SCIM's URNs compare.
func hasSchema(schemas []string, urn string) bool {
	for _, s := range schemas {
		if strings.EqualFold(s, urn) {
			return true
		}
	}
	return false
}
