// Sample values for every field of a message, set through protoreflect, so that tests of the
// hand-written JSON paths walk the schema instead of a list of fields written out by hand.
package codec

import (
	"bytes"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestForEveryFieldSetsFieldsOfEveryKind: User and GetUserRequest hold only int32, string and
// Timestamp fields today, so the tests that walk them cannot show that forEveryField would set a
// field of any other kind added later. These messages hold the rest: lists, maps, oneofs, enums,
// nested and recursive messages, every scalar kind, and proto2 presence.
func TestForEveryFieldSetsFieldsOfEveryKind(t *testing.T) {
	for _, message := range []proto.Message{
		&descriptorpb.FileDescriptorProto{}, &descriptorpb.FieldDescriptorProto{}, &structpb.Struct{},
		&wrapperspb.BoolValue{}, &wrapperspb.BytesValue{}, &wrapperspb.DoubleValue{}, &wrapperspb.FloatValue{},
		&wrapperspb.Int64Value{}, &wrapperspb.UInt32Value{}, &wrapperspb.UInt64Value{},
	} {
		m := message.ProtoReflect()
		set := map[protoreflect.FieldNumber]bool{}
		forEveryField(m, func(alone protoreflect.FieldDescriptor, _ int, x protoreflect.Message) {
			if alone == nil {
				return
			}
			if !x.Has(alone) {
				t.Errorf("%s: a sample of %s left it unset", m.Descriptor().FullName(), alone.Name())
			}
			set[alone.Number()] = true
		})
		for i := range m.Descriptor().Fields().Len() {
			if fd := m.Descriptor().Fields().Get(i); !set[fd.Number()] {
				t.Errorf("%s: no sample for field %s (%s)", m.Descriptor().FullName(), fd.Name(), fd.Kind())
			}
		}
	}
}

// forEveryField calls check with messages of m's type that have fields set through protoreflect:
// each field alone, to each of its sample values, then every field at once, round after round
// through the samples, so that the first round holds each field's first, ordinary sample. alone
// is the field set, or nil for the rounds of every field. A field added to the proto is iterated
// with the rest, whatever its kind.
func forEveryField(m protoreflect.Message, check func(alone protoreflect.FieldDescriptor, round int, m protoreflect.Message)) {
	fields := m.Descriptor().Fields()
	samples := make([][]protoreflect.Value, fields.Len())
	rounds := 0
	for i := range fields.Len() {
		fd := fields.Get(i)
		samples[i] = sampleFieldValues(m.New(), fd, 0)
		rounds = max(rounds, len(samples[i]))
		for _, v := range samples[i] {
			one := m.New()
			one.Set(fd, v)
			check(fd, 0, one)
		}
	}
	for round := range rounds {
		all := m.New()
		for i := range fields.Len() {
			if len(samples[i]) > 0 {
				all.Set(fields.Get(i), samples[i][round%len(samples[i])])
			}
		}
		check(nil, round, all)
	}
}

// sampleFieldValues returns values for fd, a field of m's type: for a list, one element and then
// all of them; for a map, one entry per sample key and value, then all keys at once; otherwise
// sampleValues. Values are made through m.NewField, so each has the field's own Go type.
func sampleFieldValues(m protoreflect.Message, fd protoreflect.FieldDescriptor, depth int) []protoreflect.Value {
	switch {
	case fd.IsList():
		elements := sampleValues(fd, func() protoreflect.Message { return m.NewField(fd).List().NewElement().Message() }, depth)
		one, all := m.NewField(fd), m.NewField(fd)
		one.List().Append(elements[0])
		for _, e := range elements {
			all.List().Append(e)
		}
		return []protoreflect.Value{one, all}
	case fd.IsMap():
		keys := sampleValues(fd.MapKey(), nil, depth)
		values := sampleValues(fd.MapValue(), func() protoreflect.Message { return m.NewField(fd).Map().NewValue().Message() }, depth)
		var out []protoreflect.Value
		for i := range max(len(keys), len(values)) {
			one := m.NewField(fd)
			one.Map().Set(keys[i%len(keys)].MapKey(), values[i%len(values)])
			out = append(out, one)
		}
		all := m.NewField(fd)
		for i, k := range keys {
			all.Map().Set(k.MapKey(), values[i%len(values)])
		}
		return append(out, all)
	default:
		return sampleValues(fd, func() protoreflect.Message { return m.NewField(fd).Message() }, depth)
	}
}

// sampleValues returns values of fd's kind that protojson writes: non-zero ones, the edges of
// each range, strings that need escaping or are not UTF-8 at all, and the zero value too where
// fd has presence (protojson writes a set zero). The first is an ordinary value that protojson
// accepts. newMessage makes an empty message of fd's type.
func sampleValues(fd protoreflect.FieldDescriptor, newMessage func() protoreflect.Message, depth int) []protoreflect.Value {
	var out []protoreflect.Value
	switch fd.Kind() {
	case protoreflect.BoolKind:
		out = append(out, protoreflect.ValueOfBool(true))
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		for i := range values.Len() {
			if n := values.Get(i).Number(); n != 0 {
				out = append(out, protoreflect.ValueOfEnum(n))
			}
		}
		out = append(out, protoreflect.ValueOfEnum(1<<20)) // a number the enum does not declare
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		for _, v := range []int32{42, 1, -1, math.MaxInt32, math.MinInt32} {
			out = append(out, protoreflect.ValueOfInt32(v))
		}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		for _, v := range []int64{42, -1, 1<<53 + 1, math.MaxInt64, math.MinInt64} {
			out = append(out, protoreflect.ValueOfInt64(v))
		}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		for _, v := range []uint32{42, math.MaxUint32} {
			out = append(out, protoreflect.ValueOfUint32(v))
		}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		for _, v := range []uint64{42, 1<<53 + 1, math.MaxUint64} {
			out = append(out, protoreflect.ValueOfUint64(v))
		}
	case protoreflect.FloatKind:
		for _, v := range []float64{1.5, -2.25, math.MaxFloat32, math.SmallestNonzeroFloat32, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1)} {
			out = append(out, protoreflect.ValueOfFloat32(float32(v)))
		}
	case protoreflect.DoubleKind:
		for _, v := range []float64{1.5, -2.25, math.MaxFloat64, math.SmallestNonzeroFloat64, 1e21, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1)} {
			out = append(out, protoreflect.ValueOfFloat64(v))
		}
	case protoreflect.StringKind:
		for _, v := range sampleStrings {
			out = append(out, protoreflect.ValueOfString(v))
		}
	case protoreflect.BytesKind:
		for _, v := range [][]byte{[]byte("Ada"), {0}, {0xff, 0xfe, '"', '\\', '+', '/'}, bytes.Repeat([]byte{0xfb}, 100)} {
			out = append(out, protoreflect.ValueOfBytes(v))
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return sampleMessages(fd.Message(), newMessage, depth)
	}
	if fd.HasPresence() {
		out = append(out, fd.Default())
	}
	return out
}

// sampleStrings are the strings every string field is set to.
var sampleStrings = []string{
	"Ada Lovelace",
	"Zoë 日本語 😀",
	`quote " backslash \ slash / <html> & 'single'`,
	"controls \x00\x01\b\f\n\r\t\x1f\x7f end",
	"line sep \u2028 para \u2029, BOM \ufeff, replacement \ufffd, nbsp \u00a0",
	`"12"`,
	"not UTF-8 \xff",         // protojson refuses it
	"a cut rune \xe6\x97 at", // and this one
}

// sampleStamps are the times every Timestamp field is set to: each number of fractional digits
// protojson writes, both sides of 1970, the ends of protojson's range and beyond them.
var sampleStamps = []struct {
	seconds int64
	nanos   int32
}{
	{1795251487, 123_456_789}, // 2026-11-21
	{0, 0}, {1, 500_000_000}, {1, 1}, {1, 10}, {1, 1000}, {1, 1_000_000}, {1, 999_999_999},
	{-1, 0}, {-1, 1}, {951782400, 0}, // 2000-02-29
	{minTimestampSeconds, 0}, {maxTimestampSeconds, 999_999_999},
	{minTimestampSeconds - 1, 0}, {maxTimestampSeconds + 1, 0}, {5, -1}, {5, 1_000_000_000},
	{math.MaxInt64, 0}, {math.MinInt64, 0},
}

// sampleMessages returns messages of type md: for a Timestamp, sampleStamps; for any other type,
// an empty message (set, so protojson writes it) and one message for each sample of each of its
// fields, down to a depth that stops recursive types.
func sampleMessages(md protoreflect.MessageDescriptor, newMessage func() protoreflect.Message, depth int) []protoreflect.Value {
	var out []protoreflect.Value
	if md.FullName() == timestampName {
		seconds, nanos := md.Fields().ByName("seconds"), md.Fields().ByName("nanos")
		for _, s := range sampleStamps {
			m := newMessage()
			m.Set(seconds, protoreflect.ValueOfInt64(s.seconds))
			m.Set(nanos, protoreflect.ValueOfInt32(s.nanos))
			out = append(out, protoreflect.ValueOfMessage(m))
		}
		return out
	}
	out = append(out, protoreflect.ValueOfMessage(newMessage()))
	if depth >= 3 {
		return out
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		for _, v := range sampleFieldValues(newMessage(), fd, depth+1) {
			m := newMessage()
			m.Set(fd, v)
			out = append(out, protoreflect.ValueOfMessage(m))
		}
	}
	return out
}
