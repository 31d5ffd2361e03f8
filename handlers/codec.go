// The one JSON codec: REST bodies and Connect JSON are read and written by the same code, so they
// share names, formats and strictness, and a user is the same bytes on both.
package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	usersv1 "usersd/gen/users/v1"
)

// jsonCodec is protojson with two changes from connect's default codec:
//   - Unknown fields are an error, as docs/API.md#the-routes promises for REST, so that a misspelt field
//     never passes unnoticed on either path.
//   - Output is compacted: protojson adds random spaces to stop callers from relying on its exact
//     bytes, and we promise byte-identical users on REST and Connect.
type jsonCodec struct {
	name string
}

// jsonCodecs replaces connect's JSON codecs under both names that connect registers.
var jsonCodecs = []connect.Codec{jsonCodec{"json"}, jsonCodec{"json; charset=utf-8"}}

func (c jsonCodec) Name() string { return c.name }

func (c jsonCodec) IsBinary() bool { return false }

func (c jsonCodec) Marshal(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("cannot encode %T: not a proto.Message", message)
	}
	return marshalJSON(m)
}

// MarshalStable is used by Connect clients to build cacheable GET URLs; our output is already stable.
func (c jsonCodec) MarshalStable(message any) ([]byte, error) { return c.Marshal(message) }

func (c jsonCodec) Unmarshal(data []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return fmt.Errorf("cannot decode into %T: not a proto.Message", message)
	}
	return unmarshalJSON(data, m)
}

// marshalJSON writes the compact protojson form of m; a User takes the direct encoder.
func marshalJSON(m proto.Message) ([]byte, error) {
	if u, ok := m.(*usersv1.User); ok {
		if out, ok := appendUserJSON(make([]byte, 0, 192), u); ok {
			return out, nil
		}
	}
	return marshalProtoJSON(m)
}

// marshalProtoJSON writes the compact protojson form of any message.
func marshalProtoJSON(m proto.Message) ([]byte, error) {
	out, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var compact bytes.Buffer
	compact.Grow(len(out))
	if err := json.Compact(&compact, out); err != nil {
		return nil, err
	}
	return compact.Bytes(), nil
}

// unmarshalJSON decodes strictly and words its errors for a client: which field, what is wrong. A
// GetUserRequest in the form clients send it takes the direct decoder; everything else, protojson.
func unmarshalJSON(data []byte, m proto.Message) error {
	if req, ok := m.(*usersv1.GetUserRequest); ok && decodeGetUserRequest(data, req) {
		return nil
	}
	return unmarshalProtoJSON(data, m)
}

// unmarshalProtoJSON decodes any message with protojson, after the checks protojson leaves out.
func unmarshalProtoJSON(data []byte, m proto.Message) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("the body is empty; expected a JSON object")
	}
	// protojson accepts a few things that are not JSON (a number with an empty exponent, such as
	// 1e); RFC 8259 decides what a body may be, so check it first.
	if !json.Valid(data) {
		return errors.New("invalid JSON: the body is not well-formed JSON (RFC 8259)")
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(data, m); err != nil {
		// protojson prefixes its messages with "proto:" and a non-breaking space; neither helps a client.
		msg := strings.TrimSpace(strings.TrimPrefix(err.Error(), "proto:"))
		return fmt.Errorf("invalid JSON: %s", strings.ReplaceAll(msg, "\u00a0", " "))
	}
	return nil
}
