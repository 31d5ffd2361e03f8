// Package restbody turns the bodies of REST writes into the messages of the contract: it takes
// out the members a client may send but the server sets (AIP-203), and reads a JSON merge patch
// (RFC 7396) of a user as the user and update mask of UpdateUser. It decides what a body means,
// not how it arrived: the handlers read it, check its media type and size, and call these.
package restbody

// Output-only members of REST write bodies (AIP-203): a client may send a resource back as it read
// it, or with anything at all in a field the server sets, and the member is ignored instead of
// refused. protojson would still parse such a member's value, so a malformed one
// ("createdAt": "") would make the whole body a 400; the members are taken out of the body first.

import (
	"bytes"
	"encoding/json"

	"google.golang.org/protobuf/reflect/protoreflect"

	"usersd/users"
)

// WithoutOutputOnly returns body, a JSON object of message md, without the members that name an
// output-only field of md (by JSON or proto name, as protojson reads them), except the field
// pathBound, which the request compares with its path and so must still decode. Every other
// member is kept byte for byte, duplicates included, for the strict codec to judge. A body that is
// not one well-formed JSON object is returned as it is: the codec then says what is wrong with it.
func WithoutOutputOnly(body []byte, md protoreflect.MessageDescriptor, pathBound protoreflect.Name) []byte {
	fields := md.Fields()
	if !mayNameOutputOnly(body, fields, pathBound) {
		return body
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if open, err := dec.Token(); err != nil || open != json.Delim('{') {
		return body
	}
	var kept [][]byte
	dropped := false
	for dec.More() {
		start := dec.InputOffset()
		key, err := dec.Token()
		if err != nil {
			return body
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return body
		}
		name, _ := key.(string)
		if f := fieldByJSONMember(fields, name); f != nil && f.Name() != pathBound && users.IsOutputOnly(f) {
			dropped = true
			continue
		}
		kept = append(kept, trimMemberStart(body[start:dec.InputOffset()]))
	}
	if closing, err := dec.Token(); err != nil || closing != json.Delim('}') {
		return body
	}
	if !dropped {
		return body
	}
	out := make([]byte, 0, len(body))
	out = append(out, '{')
	out = append(out, bytes.Join(kept, []byte{','})...)
	out = append(out, '}')
	// Whatever follows the object is kept too, so that trailing data is still refused.
	return append(out, body[dec.InputOffset():]...)
}

// trimMemberStart cuts the whitespace and the comma that separate a member from the one before it.
func trimMemberStart(member []byte) []byte {
	member = bytes.TrimLeft(member, " \t\r\n")
	member = bytes.TrimPrefix(member, []byte{','})
	return bytes.TrimLeft(member, " \t\r\n")
}

// mayNameOutputOnly reports whether body could hold a member naming an output-only field: it holds
// one of their names, or an escape that could spell one. Most writes hold neither, and skip the walk.
func mayNameOutputOnly(body []byte, fields protoreflect.FieldDescriptors, pathBound protoreflect.Name) bool {
	if bytes.IndexByte(body, '\\') >= 0 {
		return true
	}
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.Name() == pathBound || !users.IsOutputOnly(f) {
			continue
		}
		if bytes.Contains(body, []byte(f.JSONName())) || bytes.Contains(body, []byte(f.Name())) {
			return true
		}
	}
	return false
}
