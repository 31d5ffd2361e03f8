// The binary codec: connect's own, but with decode errors that name the message by its proto name.
package codec

import (
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
)

// protoCodec is protobuf's binary form, as connect's default codec writes and reads it. It exists
// for its errors: connect's says "unmarshal into *usersv1.GetUserRequest", a Go type name that
// tells clients about the implementation and nothing about the contract; this one says
// "users.v1.GetUserRequest", the name in the proto.
type protoCodec struct{}

var _ connect.Codec = protoCodec{}

func (protoCodec) Name() string { return "proto" }

func (protoCodec) IsBinary() bool { return true }

func (protoCodec) Marshal(message any) ([]byte, error) {
	m, err := asProto(message)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(m)
}

// MarshalAppend lets connect write into a buffer it reuses, as its own codec does.
func (protoCodec) MarshalAppend(dst []byte, message any) ([]byte, error) {
	m, err := asProto(message)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, m)
}

// MarshalStable is for clients that put messages in GET URLs.
func (protoCodec) MarshalStable(message any) ([]byte, error) {
	m, err := asProto(message)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

func (protoCodec) Unmarshal(data []byte, message any) error {
	m, err := asProto(message)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(data, m); err != nil {
		// protobuf's messages start "proto:" followed by a space or, at random, a no-break space.
		detail := strings.TrimSpace(strings.TrimPrefix(strings.ReplaceAll(err.Error(), "\u00a0", " "), "proto:"))
		return fmt.Errorf("invalid protobuf for %s: %s", m.ProtoReflect().Descriptor().FullName(), detail)
	}
	return nil
}

func asProto(message any) (proto.Message, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto.Message", message) // a bug of ours, never a client's
	}
	return m, nil
}
