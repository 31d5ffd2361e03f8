package scim

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/store"
	"usersd/users"
)

// defaultCount is the users a list answers when the client asks for no count (RFC 7644 leaves it
// to the service provider).
const defaultCount = 100

// call is the context of a SCIM request's calls of the service. Identity providers send no
// consistency token, and read what they have just written (a create, then a look-up), so every
// read goes to the primary.
func call(r *http.Request) context.Context {
	return users.WithCall(r.Context(), &users.Call{Primary: true})
}

// pathID is the user id of the request's path. SCIM ids are strings: one that is not the decimal
// digits of a positive integer names no user of usersd's, so it is 404, as an id that is not
// there.
func pathID(r *http.Request) (int32, error) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 32)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != raw {
		return 0, &Error{Status: http.StatusNotFound, Detail: "no user with id " + strconv.Quote(raw)}
	}
	return int32(id), nil
}

// ifMatch is the request's If-Match as the service takes it: SCIM clients send back the weak tag
// of meta.version, which names the same version as usersd's strong one.
func ifMatch(r *http.Request) string {
	value := r.Header.Get("If-Match")
	if value == "" {
		return ""
	}
	parts := strings.Split(value, ",")
	for i, p := range parts {
		parts[i] = strings.TrimPrefix(strings.TrimSpace(p), "W/")
	}
	return strings.Join(parts, ", ")
}

// answerUser writes u as a User resource with status, its version as ETag, and Location when it
// was created.
func answerUser(w http.ResponseWriter, r *http.Request, status int, u *usersv1.User, p projection) {
	res := resource(u, baseURL(r))
	w.Header().Set("ETag", version(u))
	if status == http.StatusCreated {
		w.Header().Set("Location", res["meta"].(map[string]any)["location"].(string))
	}
	writeJSON(w, status, p.apply(res))
}

func (f *face) getUser(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	p, err := projectionOf(r.URL.Query().Get("attributes"), r.URL.Query().Get("excludedAttributes"))
	if err != nil {
		f.fail(w, r, err)
		return
	}
	var unless *users.EntityTags // If-None-Match (RFC 7644 section 3.14): 304 while the user is at one of them
	if value := r.Header.Get("If-None-Match"); value != "" {
		tags, err := users.ParseEntityTags(value)
		if err != nil {
			f.fail(w, r, err)
			return
		}
		unless = &tags
	}
	u, err := f.svc.GetUser(call(r), &usersv1.GetUserRequest{Id: id})
	if err != nil {
		f.fail(w, r, err)
		return
	}
	if unless != nil && unless.HoldsWeak(u.GetEtag()) {
		w.Header().Set("ETag", version(u))
		w.WriteHeader(http.StatusNotModified)
		return
	}
	answerUser(w, r, http.StatusOK, u, p)
}

// readUser reads the User resource of a create or a replace, and the user it describes.
func readUser(w http.ResponseWriter, r *http.Request) (userIn, *usersv1.User, error) {
	var in userIn
	if err := readBody(w, r, &in); err != nil {
		return in, nil, err
	}
	u, err := in.user()
	return in, u, err
}

func (f *face) createUser(w http.ResponseWriter, r *http.Request) {
	_, u, err := readUser(w, r)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	res, err := f.svc.CreateUser(call(r), &usersv1.CreateUserRequest{User: u})
	if err != nil {
		f.fail(w, r, err)
		return
	}
	answerUser(w, r, http.StatusCreated, res.GetUser(), projection{})
}

// replacedFields are the fields of a user that a SCIM PUT replaces: every one SCIM knows of, so
// that an attribute the body leaves out is cleared. The role only when the body sends roles, as
// identity providers that do not manage roles leave them out; labels are not SCIM's.
var replacedFields = []string{"name", "user_name", "given_name", "family_name", "email", "external_id", "active"}

func (f *face) replaceUser(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	in, u, err := readUser(w, r)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	mask := replacedFields
	if in.Roles != nil {
		mask = append(mask[:len(mask):len(mask)], "role")
	}
	res, err := f.svc.UpdateUser(call(r), &usersv1.UpdateUserRequest{Id: id, User: u,
		UpdateMask: &fieldmaskpb.FieldMask{Paths: mask}, Etag: ifMatch(r)})
	if err != nil {
		f.fail(w, r, err)
		return
	}
	answerUser(w, r, http.StatusOK, res.GetUser(), projection{})
}

func (f *face) deleteUser(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	if _, err := f.svc.DeleteUser(call(r), &usersv1.DeleteUserRequest{Id: id, Etag: ifMatch(r)}); err != nil {
		f.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// user is the usersd user that a created or replaced resource describes. usersd's one name is
// displayName, else name.formatted, else the given and family names, else the userName: a user
// always has one.
func (in userIn) user() (*usersv1.User, error) {
	if !hasSchema(in.Schemas, schemaUser) {
		return nil, refuse(typeInvalidValue, "schemas must hold %s", schemaUser)
	}
	if in.UserName == nil || strings.TrimSpace(*in.UserName) == "" {
		return nil, refuse(typeInvalidValue, "userName is required")
	}
	u := &usersv1.User{UserName: *in.UserName, Email: chosen(in.Emails), Role: chosen(in.Roles), Active: proto.Bool(true)}
	if in.ExternalID != nil {
		u.ExternalId = *in.ExternalID
	}
	if in.Active != nil {
		u.Active = proto.Bool(bool(*in.Active))
	}
	var formatted string
	if in.Name != nil {
		u.GivenName, u.FamilyName, formatted = deref(in.Name.GivenName), deref(in.Name.FamilyName), deref(in.Name.Formatted)
	}
	u.Name = displayName(deref(in.DisplayName), formatted, u.GivenName, u.FamilyName, u.UserName)
	return u, nil
}

// displayName is the name usersd keeps for a user: the first of the names SCIM gives that is set.
func displayName(display, formatted, given, family, userName string) string {
	for _, name := range []string{display, formatted, strings.TrimSpace(given + " " + family)} {
		if strings.TrimSpace(name) != "" {
			return name
		}
	}
	return userName
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// sortKeys are the attributes a list sorts by, lower-cased, as the store's sort fields.
var sortKeys = map[string]store.SortField{
	"id":             store.SortByID,
	"displayname":    store.SortByName,
	"name.formatted": store.SortByName,
	"roles":          store.SortByRole,
	"roles.value":    store.SortByRole,
	"meta.created":   store.SortByCreatedAt,
	"username":       store.SortByUserName,
}

// listParams are the parameters of a list, from a query string or a search request's body.
type listParams struct {
	filter, sortBy, sortOrder      string
	startIndex, count              *int
	attributes, excludedAttributes string
}

func (f *face) listUsers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	params := listParams{filter: q.Get("filter"), sortBy: q.Get("sortBy"), sortOrder: q.Get("sortOrder"),
		attributes: q.Get("attributes"), excludedAttributes: q.Get("excludedAttributes")}
	for name, into := range map[string]**int{"startIndex": &params.startIndex, "count": &params.count} {
		if raw := q.Get(name); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil {
				f.fail(w, r, refuse(typeInvalidValue, "%s must be an integer, not %q", name, raw))
				return
			}
			*into = &n
		}
	}
	f.list(w, r, params)
}

// searchRequest is the body of POST /Users/.search (RFC 7644 section 3.4.3).
type searchRequest struct {
	Schemas            []string `json:"schemas"`
	Filter             string   `json:"filter"`
	SortBy             string   `json:"sortBy"`
	SortOrder          string   `json:"sortOrder"`
	StartIndex         *int     `json:"startIndex"`
	Count              *int     `json:"count"`
	Attributes         []string `json:"attributes"`
	ExcludedAttributes []string `json:"excludedAttributes"`
}

func (f *face) searchUsers(w http.ResponseWriter, r *http.Request) {
	var in searchRequest
	if err := readBody(w, r, &in); err != nil {
		f.fail(w, r, err)
		return
	}
	if !hasSchema(in.Schemas, schemaSearchRequest) {
		f.fail(w, r, refuse(typeInvalidValue, "schemas must hold %s", schemaSearchRequest))
		return
	}
	f.list(w, r, listParams{filter: in.Filter, sortBy: in.SortBy, sortOrder: in.SortOrder, startIndex: in.StartIndex,
		count: in.Count, attributes: strings.Join(in.Attributes, ","), excludedAttributes: strings.Join(in.ExcludedAttributes, ",")})
}

// list answers a page of users as a ListResponse. As RFC 7644 section 3.4.2.4 says, a startIndex
// below 1 is 1 and a negative count is 0; a count above the most a page holds is lowered to it.
func (f *face) list(w http.ResponseWriter, r *http.Request, params listParams) {
	flt, err := parseFilter(params.filter)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	p, err := projectionOf(params.attributes, params.excludedAttributes)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	start, count := 1, defaultCount
	if params.startIndex != nil {
		start = max(*params.startIndex, 1)
	}
	if params.count != nil {
		count = min(max(*params.count, 0), users.MaxFindLimit)
	}
	var sort []store.SortKey
	if params.sortBy != "" {
		field, ok := sortKeys[strings.ToLower(params.sortBy)]
		if !ok {
			f.fail(w, r, refuse(typeInvalidValue, "cannot sort by %q; sort by id, userName, displayName, roles or meta.created", params.sortBy))
			return
		}
		descending := false
		switch strings.ToLower(params.sortOrder) {
		case "", "ascending":
		case "descending":
			descending = true
		default:
			f.fail(w, r, refuse(typeInvalidValue, "sortOrder is ascending or descending, not %q", params.sortOrder))
			return
		}
		sort = []store.SortKey{{Field: field, Descending: descending}}
	}
	page, total, err := f.svc.FindUsers(call(r), users.FindQuery{Filter: flt, Sort: sort, Offset: int64(start - 1), Limit: count})
	if err != nil {
		f.fail(w, r, err)
		return
	}
	base := baseURL(r)
	resources := make([]any, len(page))
	for i, u := range page {
		resources[i] = p.apply(resource(u, base))
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"schemas":      []string{schemaListResponse},
		"totalResults": total,
		"startIndex":   start,
		"itemsPerPage": len(page),
		"Resources":    resources,
	})
}
