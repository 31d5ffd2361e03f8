package restbody

import (
	"bytes"
	"encoding/json"

	"google.golang.org/protobuf/reflect/protoreflect"

	"usersd/internal/plainjson"
)

// WithoutOutputOnlyInList is WithoutOutputOnly for the messages that a batch carries: body is a
// JSON object of message md, whose repeated message field list holds items, each with a message
// field named item (BatchCreateUsersRequest's requests, each with its user). The output-only
// members of each item's message are dropped, so that a batch ignores them whatever their values,
// as a request of one does. Every other member is kept byte for byte, duplicates included, and a
// body of any other shape is returned as it is, for the strict codec to judge.
func WithoutOutputOnlyInList(body []byte, md protoreflect.MessageDescriptor, list, item protoreflect.Name) []byte {
	listField := md.Fields().ByName(list)
	if listField == nil || !listField.IsList() || listField.Message() == nil {
		return body
	}
	itemField := listField.Message().Fields().ByName(item)
	if itemField == nil || itemField.IsList() || itemField.Message() == nil {
		return body
	}
	if !mayNameOutputOnly(body, itemField.Message().Fields(), "") {
		return body
	}
	out, ok := mapMembers(body, func(name string, value []byte) ([]byte, bool) {
		if fieldByJSONMember(md.Fields(), name) != listField {
			return value, true
		}
		return mapElements(value, func(element []byte) ([]byte, bool) {
			return mapMembers(element, func(name string, value []byte) ([]byte, bool) {
				if fieldByJSONMember(listField.Message().Fields(), name) != itemField {
					return value, true
				}
				return WithoutOutputOnly(value, itemField.Message(), ""), true
			})
		})
	})
	if !ok {
		return body
	}
	return out
}

// mapMembers rewrites the value of each member of the JSON object body with fn, keeping the
// members' names and order; ok is false when body is not one well-formed object, or fn says so.
func mapMembers(body []byte, fn func(name string, value []byte) ([]byte, bool)) (_ []byte, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if open, err := dec.Token(); err != nil || open != json.Delim('{') {
		return nil, false
	}
	out := []byte{'{'}
	for first := true; dec.More(); first = false {
		key, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, _ := key.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false
		}
		mapped, ok := fn(name, value)
		if !ok {
			return nil, false
		}
		encodedName, _ := plainjson.Marshal(name) // a string always encodes
		if !first {
			out = append(out, ',')
		}
		out = append(append(append(out, encodedName...), ':'), mapped...)
	}
	if closing, err := dec.Token(); err != nil || closing != json.Delim('}') {
		return nil, false
	}
	return append(append(out, '}'), body[dec.InputOffset():]...), true // trailing data is still refused
}

// mapElements rewrites each element of the JSON array body with fn, in order; ok is false when
// body is not one well-formed array, or fn says so.
func mapElements(body []byte, fn func(element []byte) ([]byte, bool)) (_ []byte, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if open, err := dec.Token(); err != nil || open != json.Delim('[') {
		return nil, false
	}
	out := []byte{'['}
	for first := true; dec.More(); first = false {
		var element json.RawMessage
		if err := dec.Decode(&element); err != nil {
			return nil, false
		}
		mapped, ok := fn(element)
		if !ok {
			return nil, false
		}
		if !first {
			out = append(out, ',')
		}
		out = append(out, mapped...)
	}
	if closing, err := dec.Token(); err != nil || closing != json.Delim(']') {
		return nil, false
	}
	return append(append(out, ']'), body[dec.InputOffset():]...), true
}
