package codec

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	usersv1 "usersd/gen/users/v1"
)

// checkUserJSON fails unless the direct encoder writes exactly what protojson writes for u, and
// declines exactly the users that protojson refuses, so that protojson gives their error.
func checkUserJSON(t *testing.T, u *usersv1.User) {
	t.Helper()
	if direct, want, wantErr := checkDirectOrDeclined(t, u); !direct && wantErr == nil {
		t.Errorf("declined %v, which protojson encodes as %s", u, want)
	}
}

// checkDirectOrDeclined fails unless the direct encoder either writes exactly protojson's bytes
// for u, after what b held, or declines u and leaves b as it was. It reports whether the encoder
// wrote u, and what protojson wrote or why it refused.
func checkDirectOrDeclined(t *testing.T, u *usersv1.User) (direct bool, want []byte, wantErr error) {
	t.Helper()
	want, wantErr = marshalProtoJSON(u)
	got, ok := appendUserJSON([]byte("prefix"), u)
	if !bytes.HasPrefix(got, []byte("prefix")) {
		t.Fatalf("appendUserJSON lost what b held: %q", got)
	}
	got = got[len("prefix"):]
	switch {
	case !ok && len(got) != 0:
		t.Errorf("declined %v but left %q behind", u, got)
	case ok && wantErr != nil:
		t.Errorf("encoded %v as %s, but protojson refuses it: %v", u, got, wantErr)
	case ok && !bytes.Equal(got, want):
		t.Errorf("user %v:\n direct    %s\n protojson %s", u, got, want)
	}
	return ok, want, wantErr
}

func stamp(seconds int64, nanos int32) *timestamppb.Timestamp {
	return &timestamppb.Timestamp{Seconds: seconds, Nanos: nanos}
}

func TestUserJSONIsProtojsonByteForByte(t *testing.T) {
	now := timestamppb.New(time.Date(2026, 11, 21, 9, 8, 7, 123_456_789, time.UTC))
	cases := []*usersv1.User{
		{},
		{Id: 1},
		{Id: -7, Name: "Ada"},
		{Id: 2147483647, Name: "Ada Lovelace", Role: "admin", CreatedAt: now, UpdatedAt: now, Etag: `"12"`},
		{Name: `quote " backslash \ slash / <html> & 'single'`},
		{Name: "controls \x00\x01\b\f\n\r\t\x1f\x7f end"},
		{Name: "Zoë 日本語 emoji 😀, line sep \u2028 para \u2029, BOM \ufeff, replacement \ufffd"},
		{Name: "invalid \xff utf-8"},
		{Role: "bad \xc3"},
		{CreatedAt: stamp(0, 0)},
		{CreatedAt: stamp(1, 500_000_000)},
		{CreatedAt: stamp(1, 1)},
		{CreatedAt: stamp(1, 1000)},
		{CreatedAt: stamp(1, 1_000_000)},
		{CreatedAt: stamp(1, 10)},
		{CreatedAt: stamp(1, 999_999_999)},
		{CreatedAt: stamp(-1, 0)},
		{CreatedAt: stamp(-62135596800, 0)},
		{CreatedAt: stamp(253402300799, 999_999_999)},
		{CreatedAt: stamp(-62135596801, 0)},
		{UpdatedAt: stamp(253402300800, 0)},
		{UpdatedAt: stamp(5, -1)},
		{UpdatedAt: stamp(5, 1_000_000_000)},
		{Etag: `W/"3"`},
	}
	for _, u := range cases {
		checkUserJSON(t, u)
	}
}

// TestUserJSONLeavesUnknownFieldsToProtojson: a User read from the wire with fields this build
// does not know goes through protojson, which decides what to do with them.
func TestUserJSONLeavesUnknownFieldsToProtojson(t *testing.T) {
	u := &usersv1.User{Id: 1, Name: "Ada"}
	u.ProtoReflect().SetUnknown([]byte{0xa8, 0x1f, 0x01}) // field 501, varint 1
	if out, ok := appendUserJSON(nil, u); ok {
		t.Errorf("encoded a user with unknown fields directly: %s", out)
	}
}

func FuzzUserJSON(f *testing.F) {
	f.Add(int32(1), "Ada", "admin", `"1"`, int64(1_700_000_000), int32(123_000_000), int64(1_700_000_001), int32(0))
	f.Add(int32(0), "\x00\"\\\u2028", "\xff", "", int64(-62135596801), int32(-1), int64(0), int32(1))
	f.Fuzz(func(t *testing.T, id int32, name, role, etag string, createdSecs int64, createdNanos int32, updatedSecs int64, updatedNanos int32) {
		u := &usersv1.User{Id: id, Name: name, Role: role, Etag: etag}
		if createdSecs != 0 || createdNanos != 0 {
			u.CreatedAt = stamp(createdSecs, createdNanos)
		}
		if updatedSecs%2 == 0 {
			u.UpdatedAt = stamp(updatedSecs, updatedNanos)
		}
		checkUserJSON(t, u)
	})
}

// TestUserJSONWritesEveryFieldOfTheSchema ties the encoder to User's descriptor rather than to a
// list of fields written out here: it sets every field the proto declares, through protoreflect,
// alone and all together, and requires protojson's bytes or a refusal each time. Each field must
// be written directly at least once, and so must the first round of all fields, or the test would
// pass by an encoder that declines everything; so a field the encoder does not write fails here,
// whether the encoder leaves it out of its bytes or is switched off by the schema check.
func TestUserJSONWritesEveryFieldOfTheSchema(t *testing.T) {
	written := map[protoreflect.FieldNumber]int{}
	forEveryField((&usersv1.User{}).ProtoReflect(), func(alone protoreflect.FieldDescriptor, round int, m protoreflect.Message) {
		u := m.Interface().(*usersv1.User)
		direct, want, wantErr := checkDirectOrDeclined(t, u)
		switch {
		case !direct && alone == nil && round == 0 && wantErr == nil:
			t.Errorf("declined the first round of every field, %v, which protojson writes as %s (schema check: %v)", u, want, userJSONMismatch)
		case direct && alone != nil:
			written[alone.Number()]++
		}
	})
	fields := (&usersv1.User{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); written[fd.Number()] == 0 {
			t.Errorf("field %d %s: the direct encoder declined every value, so it does not write this field (schema check: %v)",
				fd.Number(), fd.Name(), userJSONMismatch)
		}
	}
}
