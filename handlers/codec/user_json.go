// A direct JSON encoder for User, the message that every read answers with. It writes the exact
// bytes that protojson (compacted) writes, without protojson's reflection and the compaction pass;
// what those cost a REST GET is measured in docs/PERFORMANCE.md#device-direct-json. Anything it
// does not cover, it leaves to protojson, so the bytes on the wire never depend
// on which path wrote them.
package codec

import (
	"maps"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	usersv1 "usersd/gen/users/v1"
)

// userJSONField is one field of User as the direct encoder writes it: its shape in the schema and
// the generated getter that reads it (the one matching the kind).
type userJSONField struct {
	fieldShape
	int32Of  func(*usersv1.User) int32
	stringOf func(*usersv1.User) string
	stampOf  func(*usersv1.User) *timestamppb.Timestamp
	boolOf   func(*usersv1.User) *bool // nil when unset
	mapOf    func(*usersv1.User) map[string]string
}

// userJSONFields is every field the encoder writes, in the order it writes them. The encoder walks
// this table, and userJSONMismatch compares the same table to User's descriptor, so the fields that
// are written and the fields that are checked cannot drift apart.
var userJSONFields = [...]userJSONField{
	{fieldShape: fieldShape{number: 1, jsonName: "id", kind: protoreflect.Int32Kind}, int32Of: (*usersv1.User).GetId},
	{fieldShape: fieldShape{number: 2, jsonName: "name", kind: protoreflect.StringKind}, stringOf: (*usersv1.User).GetName},
	{fieldShape: fieldShape{number: 3, jsonName: "role", kind: protoreflect.StringKind}, stringOf: (*usersv1.User).GetRole},
	{fieldShape: fieldShape{number: 4, jsonName: "createdAt", kind: protoreflect.MessageKind, message: timestampName}, stampOf: (*usersv1.User).GetCreatedAt},
	{fieldShape: fieldShape{number: 5, jsonName: "updatedAt", kind: protoreflect.MessageKind, message: timestampName}, stampOf: (*usersv1.User).GetUpdatedAt},
	{fieldShape: fieldShape{number: 6, jsonName: "etag", kind: protoreflect.StringKind}, stringOf: (*usersv1.User).GetEtag},
	{fieldShape: fieldShape{number: 7, jsonName: "userName", kind: protoreflect.StringKind}, stringOf: (*usersv1.User).GetUserName},
	{fieldShape: fieldShape{number: 8, jsonName: "givenName", kind: protoreflect.StringKind}, stringOf: (*usersv1.User).GetGivenName},
	{fieldShape: fieldShape{number: 9, jsonName: "familyName", kind: protoreflect.StringKind}, stringOf: (*usersv1.User).GetFamilyName},
	{fieldShape: fieldShape{number: 10, jsonName: "email", kind: protoreflect.StringKind}, stringOf: (*usersv1.User).GetEmail},
	{fieldShape: fieldShape{number: 11, jsonName: "externalId", kind: protoreflect.StringKind}, stringOf: (*usersv1.User).GetExternalId},
	{fieldShape: fieldShape{number: 12, jsonName: "active", kind: protoreflect.BoolKind, presence: true}, boolOf: func(u *usersv1.User) *bool { return u.Active }},
	{fieldShape: fieldShape{number: 13, jsonName: "labels", kind: protoreflect.MessageKind, stringMap: true}, mapOf: (*usersv1.User).GetLabels},
	{fieldShape: fieldShape{number: 14, jsonName: "deleteTime", kind: protoreflect.MessageKind, message: timestampName}, stampOf: (*usersv1.User).GetDeleteTime},
	{fieldShape: fieldShape{number: 15, jsonName: "purgeTime", kind: protoreflect.MessageKind, message: timestampName}, stampOf: (*usersv1.User).GetPurgeTime},
}

// timestampName is the one message type the encoder writes, in appendTimestamp.
var timestampName = (&timestamppb.Timestamp{}).ProtoReflect().Descriptor().FullName()

// userJSONMismatch says how User's descriptor differs from userJSONFields; while it is not nil the
// encoder declines every user (see matchFields for why it does not panic).
var userJSONMismatch = matchFields((&usersv1.User{}).ProtoReflect().Descriptor(), userJSONShapes())

// userJSONShapes is the shape of each field of userJSONFields.
func userJSONShapes() []fieldShape {
	shapes := make([]fieldShape, len(userJSONFields))
	for i, f := range userJSONFields {
		shapes[i] = f.fieldShape
	}
	return shapes
}

// appendUserJSON appends the protojson form of u to b. It reports false, with b unchanged, when u
// needs protojson itself: unknown fields, a string that is not valid UTF-8 (an error there), a
// timestamp out of protojson's range, or a schema that userJSONFields no longer describes.
func appendUserJSON(b []byte, u *usersv1.User) ([]byte, bool) {
	if userJSONMismatch != nil || len(u.ProtoReflect().GetUnknown()) > 0 {
		return b, false
	}
	start := len(b)
	b = append(b, '{')
	// protojson writes fields in the order the .proto declares them and leaves out zero values.
	for i := range userJSONFields {
		f := &userJSONFields[i]
		ok := true
		switch f.kind {
		case protoreflect.Int32Kind:
			v := f.int32Of(u)
			if v == 0 {
				continue
			}
			b = appendJSONName(b, start, f.jsonName)
			b = strconv.AppendInt(b, int64(v), 10)
		case protoreflect.StringKind:
			v := f.stringOf(u)
			if v == "" {
				continue
			}
			b = appendJSONName(b, start, f.jsonName)
			b, ok = AppendJSONString(b, v)
		case protoreflect.BoolKind:
			v := f.boolOf(u)
			if v == nil {
				continue
			}
			b = appendJSONName(b, start, f.jsonName)
			b = strconv.AppendBool(b, *v)
		case protoreflect.MessageKind:
			if f.stringMap {
				m := f.mapOf(u)
				if len(m) == 0 {
					continue
				}
				b = appendJSONName(b, start, f.jsonName)
				b, ok = appendStringMap(b, m)
				break
			}
			v := f.stampOf(u)
			if v == nil {
				continue
			}
			b = appendJSONName(b, start, f.jsonName)
			b, ok = appendTimestamp(b, v)
		default:
			ok = false // a kind added to the table without code to write it
		}
		if !ok {
			return b[:start], false
		}
	}
	return append(b, '}'), true
}

// appendStringMap writes m as protojson writes a map<string, string>: an object, its keys sorted.
func appendStringMap(b []byte, m map[string]string) ([]byte, bool) {
	b = append(b, '{')
	for i, key := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = AppendJSONString(b, key); !ok {
			return b, false
		}
		b = append(b, ':')
		if b, ok = AppendJSONString(b, m[key]); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendJSONName writes "name": after a comma unless it is the first member of the object that
// starts at b[start].
func appendJSONName(b []byte, start int, name string) []byte {
	if len(b) > start+1 {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// AppendJSONString quotes s as protojson does: only ", \ and control characters are escaped, the
// short forms where JSON has them; every other character, non-ASCII included, is written as is. It
// declines a string that is not valid UTF-8, which protojson refuses. One pass does both: ASCII
// bytes byte by byte, anything else a rune at a time.
func AppendJSONString(b []byte, s string) ([]byte, bool) {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				return b, false
			}
			b = append(b, s[i:i+size]...)
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= ' ':
			b = append(b, c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		default:
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
	}
	return append(b, '"'), true
}

// The range of a Timestamp that protojson accepts: years 0001 to 9999.
const (
	minTimestampSeconds = -62135596800
	maxTimestampSeconds = 253402300799
)

// appendTimestamp writes t in RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits, as protojson does.
func appendTimestamp(b []byte, t *timestamppb.Timestamp) ([]byte, bool) {
	secs, nanos := t.GetSeconds(), t.GetNanos()
	if secs < minTimestampSeconds || secs > maxTimestampSeconds || nanos < 0 || nanos > 999_999_999 {
		return b, false
	}
	b = append(b, '"')
	b = appendDateTime(b, time.Unix(secs, 0).UTC())
	if nanos != 0 {
		digits := 9
		for digits > 3 && nanos%1000 == 0 {
			nanos /= 1000
			digits -= 3
		}
		b = append(b, '.')
		b = appendDigits(b, int(nanos), digits)
	}
	return append(b, 'Z', '"'), true
}

// appendDateTime writes t as 2006-01-02T15:04:05, with the digits appended directly: the general
// layout interpreter of time.AppendFormat was a visible part of encoding a user.
func appendDateTime(b []byte, t time.Time) []byte {
	year, month, day := t.Date()
	hour, minute, second := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	return appendDigits(b, second, 2)
}

// appendDigits writes n, from 0 up, as exactly width digits with leading zeros.
func appendDigits(b []byte, n, width int) []byte {
	for range width {
		b = append(b, '0')
	}
	for i := len(b) - 1; n > 0; i, n = i-1, n/10 {
		b[i] = byte('0' + n%10)
	}
	return b
}
