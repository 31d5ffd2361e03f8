// The labels of a merge patch of a user: the one member that is a map, merged key by key.
package restbody

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	usersv1 "usersd/gen/users/v1"
	"usersd/users"
)

// labelsPatch is the labels member of a merge patch: whole (null removes every label), or key by
// key (RFC 7396 merges an object member by member: a key with null removes that label).
type labelsPatch struct {
	present   bool
	removeAll bool
	keys      map[string]*string
}

// cutLabels takes the labels member out of a merge patch's body, for protojson, which refuses the
// nulls that a patch of labels holds, and returns what it asks. A body that is not an object of
// members is returned as it is, for protojson to refuse.
func cutLabels(body []byte) ([]byte, labelsPatch, error) {
	if !bytes.Contains(body, []byte("labels")) && bytes.IndexByte(body, '\\') < 0 {
		return body, labelsPatch{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if open, err := dec.Token(); err != nil || open != json.Delim('{') {
		return body, labelsPatch{}, nil
	}
	var kept [][]byte
	var raw json.RawMessage
	var patch labelsPatch
	for dec.More() {
		start := dec.InputOffset()
		key, err := dec.Token()
		if err != nil {
			return body, labelsPatch{}, nil
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return body, labelsPatch{}, nil
		}
		if key == "labels" {
			if patch.present {
				return nil, labelsPatch{}, users.InvalidField("labels", "labels appears more than once in the patch")
			}
			patch.present, raw = true, value
			continue
		}
		kept = append(kept, trimMemberStart(body[start:dec.InputOffset()]))
	}
	if closing, err := dec.Token(); err != nil || closing != json.Delim('}') || !patch.present {
		return body, labelsPatch{}, nil
	}
	if !utf8.Valid(raw) {
		return nil, labelsPatch{}, users.InvalidField("labels", "labels must be UTF-8 text")
	}
	if string(raw) == "null" {
		patch.removeAll = true
	} else if err := json.Unmarshal(raw, &patch.keys); err != nil || patch.keys == nil {
		return nil, labelsPatch{}, users.InvalidField("labels", "labels must be an object of strings, each null to remove the label")
	}
	out := make([]byte, 0, len(body))
	out = append(out, '{')
	out = append(out, bytes.Join(kept, []byte{','})...)
	out = append(out, '}')
	return append(out, body[dec.InputOffset():]...), patch, nil
}

// apply puts the patch of labels into the user and mask of UpdateUser: the whole map for null, and
// labels.KEY for each key otherwise, with its value in user.labels unless it is removed.
func (p labelsPatch) apply(user *usersv1.User, mask *fieldmaskpb.FieldMask) error {
	if !p.present {
		return nil
	}
	if p.removeAll {
		mask.Paths = append(mask.Paths, "labels")
		return nil
	}
	for _, key := range slices.Sorted(maps.Keys(p.keys)) {
		if err := users.CheckLabelKey(key); err != nil {
			return err
		}
		value := p.keys[key]
		mask.Paths = append(mask.Paths, "labels."+key)
		if value == nil {
			continue
		}
		if user.Labels == nil {
			user.Labels = map[string]string{}
		}
		user.Labels[key] = *value
	}
	return nil
}
