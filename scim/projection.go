package scim

import (
	"strings"
)

// projection is what attributes and excludedAttributes (RFC 7644 section 3.9) leave of a resource:
// only the attributes named, or every one but those named. id and schemas are always returned.
type projection struct {
	only, except map[string]map[string]bool // lower-cased attribute, to its lower-cased sub-attributes (nil: all of it)
}

// alwaysReturned are the attributes whose "returned" is "always" (RFC 7643 section 7).
var alwaysReturned = map[string]bool{"id": true, "schemas": true}

// projectionOf reads the comma-separated attribute lists of a request; at most one may be given.
func projectionOf(attributes, excluded string) (projection, error) {
	if strings.TrimSpace(attributes) != "" && strings.TrimSpace(excluded) != "" {
		return projection{}, refuse(typeInvalidValue, "give attributes or excludedAttributes, not both")
	}
	return projection{only: attributeSet(attributes), except: attributeSet(excluded)}, nil
}

// attributeSet reads a list such as "userName,name.givenName,urn:...:User:emails.value".
func attributeSet(list string) map[string]map[string]bool {
	if strings.TrimSpace(list) == "" {
		return nil
	}
	set := map[string]map[string]bool{}
	for item := range strings.SplitSeq(list, ",") {
		item = strings.ToLower(strings.TrimSpace(item))
		if rest, ok := strings.CutPrefix(item, strings.ToLower(schemaUser)+":"); ok {
			item = rest
		}
		if item == "" {
			continue
		}
		attr, sub, hasSub := strings.Cut(item, ".")
		if !hasSub {
			set[attr] = nil
			continue
		}
		if subs, ok := set[attr]; ok && subs == nil {
			continue // the whole attribute is named already
		}
		if set[attr] == nil {
			set[attr] = map[string]bool{}
		}
		set[attr][sub] = true
	}
	return set
}

// apply returns what the projection leaves of res.
func (p projection) apply(res map[string]any) map[string]any {
	if p.only == nil && p.except == nil {
		return res
	}
	out := map[string]any{}
	for name, value := range res {
		key := strings.ToLower(name)
		switch {
		case alwaysReturned[key]:
			out[name] = value
		case p.only != nil:
			subs, named := p.only[key]
			if !named {
				continue
			}
			if subs == nil {
				out[name] = value
			} else if kept := keepSubs(value, subs, true); kept != nil {
				out[name] = kept
			}
		default:
			subs, named := p.except[key]
			switch {
			case !named:
				out[name] = value
			case subs != nil:
				if kept := keepSubs(value, subs, false); kept != nil {
					out[name] = kept
				}
			}
		}
	}
	return out
}

// keepSubs is value, a complex attribute or a list of them, with only (keep) or without (not keep)
// the sub-attributes subs; nil when nothing is left.
func keepSubs(value any, subs map[string]bool, keep bool) any {
	switch v := value.(type) {
	case map[string]any:
		out := map[string]any{}
		for name, sub := range v {
			if subs[strings.ToLower(name)] == keep {
				out[name] = sub
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		var out []any
		for _, item := range v {
			if kept := keepSubs(item, subs, keep); kept != nil {
				out = append(out, kept)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return value
}
