// Entity tags (RFC 9110 section 8.8.3, AIP-154): the etag of a user, and the If-Match and
// If-None-Match values that refer to it.
package users

import (
	"context"
	"strconv"
	"strings"

	"usersd/store"
)

// ETag is the user's strong entity tag (RFC 9110), quotes included: it is derived from the version,
// which grows on every write, so it changes on every write.
func ETag(u store.User) string {
	return `"` + strconv.FormatInt(u.Version, 10) + `"`
}

// MaxEntityTags bounds the list in one If-Match value (or etag field), and so the size of the query it becomes.
const MaxEntityTags = 32

// entityTag is one element of an If-Match or If-None-Match list.
type entityTag struct {
	weak   bool
	opaque string // between the quotes
}

// version returns the user version that the tag names, if it is one of ours: the decimal digits
// that etag writes, exactly (so "03" is not the tag of version 3 under strong comparison).
func (t entityTag) version() (int64, bool) {
	v, err := strconv.ParseInt(t.opaque, 10, 64)
	return v, err == nil && v > 0 && strconv.FormatInt(v, 10) == t.opaque
}

// EntityTags is a parsed If-Match or If-None-Match value, or the etag field of an RPC request: "*"
// or a list of tags. Its zero value is a list of no tags, which holds no etag.
type EntityTags struct {
	tags     []entityTag
	wildcard bool
}

// ParseEntityTags reads "*" or a comma-separated list of entity tags, possibly with empty elements
// (RFC 9110 section 5.6.1). A malformed value is invalid_argument.
func ParseEntityTags(value string) (EntityTags, error) {
	tags, wildcard, err := parseEntityTags(value)
	return EntityTags{tags: tags, wildcard: wildcard}, err
}

// HoldsStrong reports whether the list holds current as If-Match compares: "*" holds any etag, and
// a weak tag holds none (RFC 9110 section 8.8.3.2).
func (t EntityTags) HoldsStrong(current string) bool {
	return holdsTag(t.tags, t.wildcard, current, false)
}

// HoldsWeak reports whether the list holds current as If-None-Match compares, ignoring W/.
func (t EntityTags) HoldsWeak(current string) bool {
	return holdsTag(t.tags, t.wildcard, current, true)
}

func parseEntityTags(value string) (tags []entityTag, wildcard bool, err error) {
	if strings.TrimSpace(value) == "*" {
		return nil, true, nil
	}
	rest := value
	for {
		rest = strings.TrimLeft(rest, " \t,")
		if rest == "" {
			break
		}
		var tag entityTag
		if after, ok := strings.CutPrefix(rest, "W/"); ok {
			tag.weak, rest = true, after
		}
		if !strings.HasPrefix(rest, `"`) {
			return nil, false, InvalidField("etag", "entity tag list %q: want * or quoted tags such as \"3\"", value)
		}
		end := strings.IndexByte(rest[1:], '"')
		if end < 0 {
			return nil, false, InvalidField("etag", "entity tag list %q: a tag has no closing quote", value)
		}
		tag.opaque, rest = rest[1:1+end], rest[2+end:]
		if !isEntityTagText(tag.opaque) {
			return nil, false, InvalidField("etag", "entity tag list %q: a tag holds a character that tags may not", value)
		}
		if len(tags) == MaxEntityTags {
			return nil, false, InvalidField("etag", "entity tag list %q: more than %d tags", value, MaxEntityTags)
		}
		tags = append(tags, tag)
		rest = strings.TrimLeft(rest, " \t")
		if rest != "" && rest[0] != ',' {
			return nil, false, InvalidField("etag", "entity tag list %q: tags must be separated by commas", value)
		}
	}
	if len(tags) == 0 {
		return nil, false, InvalidField("etag", "entity tag list %q is empty", value)
	}
	return tags, false, nil
}

// isEntityTagText reports whether s may stand between an entity tag's quotes (etagc).
func isEntityTagText(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x21 || c == '"' || c == 0x7f {
			return false
		}
	}
	return true
}

// ifMatchVersions turns the value of If-Match, or of an RPC request's etag field, into the
// precondition of a write. Empty (no header, no field) and "*" set none: a missing user is answered
// 404 whatever the condition (RFC 9110 section 13.2.1). If-Match compares strongly, so weak tags and
// tags that are not ours match no version; if no tag is left the write fails its precondition.
func ifMatchVersions(value string) (store.IfVersion, error) {
	if value == "" {
		return nil, nil
	}
	tags, wildcard, err := parseEntityTags(value)
	if err != nil || wildcard {
		return nil, err
	}
	versions := store.IfVersion{}
	for _, tag := range tags {
		if v, ok := tag.version(); ok && !tag.weak {
			versions = append(versions, v)
		}
	}
	return versions, nil
}

// holdsTag reports whether a parsed list holds current: "*" holds any, no tags none. weak compares
// as If-None-Match does, ignoring W/ (RFC 9110 section 8.8.3.2); otherwise as If-Match does, where
// a weak tag matches nothing.
func holdsTag(tags []entityTag, wildcard bool, current string, weak bool) bool {
	if wildcard {
		return true
	}
	for _, tag := range tags {
		if (weak || !tag.weak) && `"`+tag.opaque+`"` == current {
			return true
		}
	}
	return false
}

// conditionalWrite begins a write on one user that etag conditions (a request's etag field or
// If-Match): the versions it allows, and the context the write runs in (forWrite).
func conditionalWrite(ctx context.Context, etag string) (context.Context, store.IfVersion, error) {
	ifVersion, err := ifMatchVersions(etag)
	if err != nil {
		return ctx, nil, err
	}
	ctx, err = forWrite(ctx)
	return ctx, ifVersion, err
}
