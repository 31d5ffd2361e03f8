package codec

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	usersv1 "usersd/gen/users/v1"
)

// checkGetUserRequestJSON fails unless the direct decoder, where it takes data, reads the same
// request that protojson reads.
func checkGetUserRequestJSON(t *testing.T, data []byte) (taken bool) {
	t.Helper()
	direct := &usersv1.GetUserRequest{Id: 99} // a stale value must not survive
	if !decodeGetUserRequest(data, direct) {
		return false
	}
	reference := &usersv1.GetUserRequest{}
	if err := unmarshalProtoJSON(data, reference); err != nil {
		t.Fatalf("%q: the direct decoder took what protojson refuses: %v", data, err)
	}
	if !proto.Equal(direct, reference) {
		t.Fatalf("%q: direct %v, protojson %v", data, direct, reference)
	}
	return true
}

func TestGetUserRequestJSONIsReadAsProtojsonReadsIt(t *testing.T) {
	for _, body := range []string{`{"id":1}`, `{"id":0}`, `{"id":-1}`, `{"id":2147483647}`, `{"id":-2147483648}`, `{"id":42}`} {
		if !checkGetUserRequestJSON(t, []byte(body)) {
			t.Errorf("%s: not taken by the direct decoder", body)
		}
	}
	for _, body := range []string{
		`{"id":2147483648}`, `{"id":-2147483649}`, `{"id":01}`, `{"id":-0}`, `{"id":+1}`, `{"id":1.0}`, `{"id":1e2}`,
		`{"id":"1"}`, `{ "id":1}`, `{"id":1 }`, `{"id":}`, `{"id":-}`, `{"id":1,"x":2}`, `{"id":1}}`, `{"ID":1}`, `{}`, ``, `{"id":12345678901}`,
	} {
		if checkGetUserRequestJSON(t, []byte(body)) {
			t.Errorf("%s: taken by the direct decoder; protojson must decide it", body)
		}
	}
}

func FuzzGetUserRequestJSON(f *testing.F) {
	for _, seed := range []string{`{"id":1}`, `{"id":-2147483648}`, `{"id":01}`, `{"id":"7"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkGetUserRequestJSON(t, data)
	})
}

// TestGetUserRequestJSONReadsEveryFieldOfTheSchema ties the decoder to GetUserRequest's
// descriptor: it sets every field the proto declares, through protoreflect, alone and all
// together, has protojson write the request (compacted, as clients send it, and as protojson
// writes it), and requires the direct decoder to decline each body or read what protojson reads.
// It must take at least one, or the test would pass by a decoder that declines everything.
func TestGetUserRequestJSONReadsEveryFieldOfTheSchema(t *testing.T) {
	taken := 0
	forEveryField((&usersv1.GetUserRequest{}).ProtoReflect(), func(_ protoreflect.FieldDescriptor, _ int, m protoreflect.Message) {
		compact, err := marshalProtoJSON(m.Interface())
		if err != nil {
			return // protojson cannot write it, so no client sends it
		}
		raw, err := protojson.Marshal(m.Interface())
		if err != nil {
			t.Fatalf("protojson wrote %s compacted but refuses it as is: %v", compact, err)
		}
		for _, body := range [][]byte{compact, raw} {
			if checkGetUserRequestJSON(t, body) {
				taken++
			}
		}
	})
	if taken == 0 {
		t.Errorf("the direct decoder declined every request protojson wrote (schema check: %v)", getUserRequestJSONMismatch)
	}
}
