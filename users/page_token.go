// Page tokens (AIP-158): the opaque position of a list's next page, bound to the query it came from.
package users

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"strconv"
	"time"

	"usersd/store"
)

// pageToken is what a token holds: the query it belongs to (a hash) and the sort attributes of the
// last item of its page. Clients must treat it as opaque; it is base64url of this JSON, so the
// format can change with a new field, and a token that fails to decode is the client's error.
type pageToken struct {
	Query     string  `json:"q"`
	ID        int32   `json:"i"`
	Name      *string `json:"n,omitempty"`
	Role      *string `json:"r,omitempty"`
	CreatedAt *int64  `json:"c,omitempty"` // Unix microseconds
}

// errBadPageToken is the answer to a token that is not one of ours or belongs to another query.
func errBadPageToken(why string) error {
	return InvalidField("page_token", "page_token (cursor on REST) %s; start again from the first page", why)
}

// queryBinding hashes the parts of a list query that a token is bound to. A token used with another
// query would otherwise start a page at a position of a different order: wrong rows, silently.
func queryBinding(parts ...string) string {
	h := fnv.New64a()
	for _, p := range parts {
		binary.Write(h, binary.BigEndian, uint32(len(p))) // length-prefixed: ("a", "bc") != ("ab", "c")
		h.Write([]byte(p))
	}
	return strconv.FormatUint(h.Sum64(), 36)
}

// usersBinding is the binding of a ListUsers query. filter is the filter's text as the client sent
// it: a token is refused with any other text, even one that means the same, rather than trusting
// that two filters select the same users.
func usersBinding(role, namePrefix, filter string, showDeleted bool, sort []store.SortKey, limit int) string {
	parts := []string{"users", role, namePrefix, strconv.Itoa(limit)}
	if showDeleted {
		// Only when set, so that the tokens of lists without deleted users stay as they were.
		parts = append(parts, "deleted")
	}
	for _, k := range sort {
		parts = append(parts, string(k.Field), strconv.FormatBool(k.Descending))
	}
	if filter != "" {
		// Only when set, for the same reason. Last, after the sort's pairs: no sort field is
		// named "filter", so no list of parts without a filter ends the same way.
		parts = append(parts, "filter", filter)
	}
	return queryBinding(parts...)
}

// postsBinding is the binding of a ListUserPosts query.
func postsBinding(userID int32, limit int) string {
	return queryBinding("posts", strconv.Itoa(int(userID)), strconv.Itoa(limit))
}

func encodePageToken(t pageToken) string {
	b, _ := json.Marshal(t) // strings, ints and pointers to them: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodePageToken reads a token and checks that it belongs to the query with binding.
func decodePageToken(text, binding string) (pageToken, error) {
	b, err := base64.RawURLEncoding.DecodeString(text)
	var t pageToken
	if err != nil || json.Unmarshal(b, &t) != nil {
		return pageToken{}, errBadPageToken("is not a token this service made")
	}
	if t.Query != binding {
		return pageToken{}, errBadPageToken("belongs to another query: role, sort, namePrefix, filter and limit must stay as they were")
	}
	if t.ID <= 0 {
		return pageToken{}, errBadPageToken("is not a token this service made")
	}
	return t, nil
}

// userPageToken is the token of the page after u in a list sorted by sort.
func userPageToken(binding string, sort []store.SortKey, u store.User) string {
	t := pageToken{Query: binding, ID: u.ID}
	for _, k := range sort {
		switch k.Field {
		case store.SortByName:
			t.Name = &u.Name
		case store.SortByRole:
			t.Role = &u.Role
		case store.SortByCreatedAt:
			created := u.CreatedAt.UnixMicro()
			t.CreatedAt = &created
		}
	}
	return encodePageToken(t)
}

// userCursor decodes a ListUsers token into the store's cursor. The binding guarantees that the
// token was made for this sort; the values are still checked, since a client can write any token,
// and a value no user could have (invalid UTF-8, control characters) must not reach the database.
// (Not the rules of a new name: a user stored before them must still be a page's last.)
func userCursor(text, binding string, sort []store.SortKey) (*store.UserCursor, error) {
	t, err := decodePageToken(text, binding)
	if err != nil {
		return nil, err
	}
	c := &store.UserCursor{ID: t.ID}
	for _, k := range sort {
		var present bool
		switch k.Field {
		case store.SortByName:
			present = t.Name != nil && checkStoredLine("name", *t.Name, maxNameLength) == nil
			if present {
				c.Name = *t.Name
			}
		case store.SortByRole:
			present = t.Role != nil && checkStoredLine("role", *t.Role, maxRoleLength) == nil
			if present {
				c.Role = *t.Role
			}
		case store.SortByCreatedAt:
			present = t.CreatedAt != nil
			if present {
				c.CreatedAt = time.UnixMicro(*t.CreatedAt).UTC()
			}
		case store.SortByID:
			present = true
		}
		if !present {
			return nil, errBadPageToken("is not a token this service made")
		}
	}
	return c, nil
}
