// Package codec is the wire form of the contract's messages: the JSON that REST bodies and Connect
// JSON share, and the binary form of gRPC and Connect proto, as connect codecs and as the functions
// REST reads and writes bodies with. One codec for every face means one set of names, formats and
// strictness, and a user that is the same bytes on each.
package codec

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

// All is every codec a connect handler of the service takes: JSON under both names that connect
// registers (replacing connect's own), then the binary form.
var All = []connect.Codec{jsonCodec{"json"}, jsonCodec{"json; charset=utf-8"}, protoCodec{}}

func (c jsonCodec) Name() string { return c.name }

func (c jsonCodec) IsBinary() bool { return false }

func (c jsonCodec) Marshal(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("cannot encode %T: not a proto.Message", message)
	}
	return MarshalJSON(m)
}

// MarshalStable is used by Connect clients to build cacheable GET URLs; our output is already stable.
func (c jsonCodec) MarshalStable(message any) ([]byte, error) { return c.Marshal(message) }

func (c jsonCodec) Unmarshal(data []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return fmt.Errorf("cannot decode into %T: not a proto.Message", message)
	}
	return UnmarshalJSON(data, m)
}

// MarshalJSON writes the compact protojson form of m; a User takes the direct encoder.
func MarshalJSON(m proto.Message) ([]byte, error) {
	if u, ok := m.(*usersv1.User); ok {
		if out, ok := appendUserJSON(make([]byte, 0, 192), u); ok {
			return out, nil
		}
	}
	return marshalProtoJSON(m)
}

// MarshalJSONList writes a JSON array of the compact protojson form of each item: the body of a
// REST list that is not paged.
func MarshalJSONList[M proto.Message](items []M) ([]byte, error) {
	body := []byte{'['}
	for i, item := range items {
		if i > 0 {
			body = append(body, ',')
		}
		encoded, err := MarshalJSON(item)
		if err != nil {
			return nil, fmt.Errorf("encode %T: %w", item, err)
		}
		body = append(body, encoded...)
	}
	return append(body, ']'), nil
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

// UnmarshalJSON decodes strictly and words its errors for a client: which field, what is wrong. A
// GetUserRequest in the form clients send it takes the direct decoder; everything else, protojson.
func UnmarshalJSON(data []byte, m proto.Message) error {
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
