// A direct JSON decoder for the one request that reads are made of: GetUserRequest, as every
// Connect JSON client sends it, {"id":N}. What protojson's reflection-driven decoder cost a Connect
// GetUser for those eight bytes is measured in docs/PERFORMANCE.md#device-direct-json. Any other
// form (spaces, the id as a string, other fields) goes to protojson, which decides it.
package codec

import (
	"strconv"

	"google.golang.org/protobuf/reflect/protoreflect"

	usersv1 "usersd/gen/users/v1"
)

// getUserRequestJSONMismatch says how GetUserRequest differs from the one field the decoder
// assumes; while it is not nil the decoder declines every body (see matchFields for why it does
// not panic). The decoder hard-codes the id's JSON name, kind and lack of presence; those are what
// this guards. A body naming any other field already goes to protojson, but the check still wants
// id to be the only field: a new one changes what clients send, and the fast path should be
// revisited then, not kept by default.
var getUserRequestJSONMismatch = matchFields((&usersv1.GetUserRequest{}).ProtoReflect().Descriptor(), getUserRequestJSONShape)

// getUserRequestJSONShape is GetUserRequest as decodeGetUserRequest reads it.
var getUserRequestJSONShape = []fieldShape{{number: 1, jsonName: "id", kind: protoreflect.Int32Kind}}

// decodeGetUserRequest sets req from data when data is exactly {"id":N}, N an int32 written as JSON
// writes integers (no leading zeros, no plus sign), and GetUserRequest is still the message of that
// one field. It reports whether it did.
func decodeGetUserRequest(data []byte, req *usersv1.GetUserRequest) bool {
	const prefix, suffix = `{"id":`, `}`
	if getUserRequestJSONMismatch != nil {
		return false
	}
	if len(data) <= len(prefix)+len(suffix) || string(data[:len(prefix)]) != prefix || data[len(data)-1] != '}' {
		return false
	}
	number := data[len(prefix) : len(data)-1]
	digits := number
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 10 || (digits[0] == '0' && len(number) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	id, err := strconv.ParseInt(string(number), 10, 32)
	if err != nil {
		return false
	}
	req.Reset()
	req.Id = int32(id)
	return true
}
