// What the hand-written JSON paths (user_json.go, request_json.go) assume of their messages, checked
// against the messages' descriptors once, when the package starts. A path whose assumptions the
// schema no longer meets is switched off, so that a field added to the proto is written and read by
// protojson instead of being dropped by code that predates it.
package codec

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// fieldShape is what a hand-written path assumes of one field: that it has this number, this JSON
// name and this kind, is singular, outside any oneof, and has presence only if it is a message.
// Those are the facts that decide whether and how protojson writes the field.
type fieldShape struct {
	number protoreflect.FieldNumber
	// jsonName is the name protojson writes (and reads), the proto name in lowerCamelCase unless the
	// proto sets json_name.
	jsonName string
	kind     protoreflect.Kind
	// message is the full name of the field's message type, for kind MessageKind only.
	message protoreflect.FullName
	// presence marks a proto3 optional scalar, written whenever it is set, even to its zero.
	presence bool
	// stringMap marks a map<string, string> (kind MessageKind, its entries), written as an object.
	stringMap bool
}

// matchFields reports, as an error, how md differs from want: want lists md's fields in the order
// the proto declares them, which is the order protojson writes them in.
//
// A mismatch switches a fast path off rather than panicking. The fast paths are an optimisation:
// without one, protojson writes and reads the same bytes at a higher CPU cost, so a schema change
// that outruns them costs time, not data. A panic at init would instead stop every binary that
// imports this package, and every test in it, over that cost; switching off keeps the service
// right, and TestFastJSONPathsMatchTheSchema fails with this error, so the change is still seen.
func matchFields(md protoreflect.MessageDescriptor, want []fieldShape) error {
	fields := md.Fields()
	if md.ExtensionRanges().Len() > 0 {
		// protojson writes extensions too, under their full names, and no table can list them.
		return fmt.Errorf("%s declares extension ranges; the direct JSON path knows only its own fields", md.FullName())
	}
	for i := range max(fields.Len(), len(want)) {
		if i >= fields.Len() {
			return fmt.Errorf("%s has no field %d %q, which the direct JSON path expects at position %d",
				md.FullName(), want[i].number, want[i].jsonName, i+1)
		}
		fd := fields.Get(i)
		if i >= len(want) {
			return fmt.Errorf("%s field %d %q (position %d) is unknown to the direct JSON path",
				md.FullName(), fd.Number(), fd.JSONName(), i+1)
		}
		if err := matchField(fd, want[i]); err != nil {
			return fmt.Errorf("%s field %d %q (position %d): %w", md.FullName(), fd.Number(), fd.JSONName(), i+1, err)
		}
	}
	return nil
}

// matchField reports how fd differs from w.
func matchField(fd protoreflect.FieldDescriptor, w fieldShape) error {
	switch {
	case fd.Number() != w.number || fd.JSONName() != w.jsonName:
		return fmt.Errorf("the direct JSON path expects field %d %q here", w.number, w.jsonName)
	case w.stringMap || fd.IsMap():
		if !w.stringMap || !fd.IsMap() || fd.MapKey().Kind() != protoreflect.StringKind || fd.MapValue().Kind() != protoreflect.StringKind {
			return fmt.Errorf("map %t, the direct JSON path expects a map<string, string> %t", fd.IsMap(), w.stringMap)
		}
		return nil
	case w.presence:
		if fd.Kind() != w.kind || fd.Cardinality() != protoreflect.Optional || !fd.HasPresence() ||
			fd.ContainingOneof() == nil || !fd.ContainingOneof().IsSynthetic() {
			return fmt.Errorf("the direct JSON path expects a proto3 optional %s", w.kind)
		}
		return nil
	case fd.Kind() != w.kind:
		return fmt.Errorf("kind %s, the direct JSON path expects %s", fd.Kind(), w.kind)
	case fd.Cardinality() != protoreflect.Optional:
		// Repeated fields and maps (repeated entries) are written as arrays and objects.
		return fmt.Errorf("cardinality %s, the direct JSON path expects a singular field", fd.Cardinality())
	case fd.ContainingOneof() != nil:
		// proto3 optional fields are in a synthetic oneof and caught here too.
		return fmt.Errorf("in oneof %s, the direct JSON path expects a plain field", fd.ContainingOneof().Name())
	case fd.HasPresence() != (w.kind == protoreflect.MessageKind):
		// A scalar with presence is written when set, even to zero; the direct path omits zeros.
		return fmt.Errorf("has presence %t, the direct JSON path expects %t", fd.HasPresence(), w.kind == protoreflect.MessageKind)
	case w.kind == protoreflect.MessageKind && fd.Message().FullName() != w.message:
		return fmt.Errorf("message %s, the direct JSON path expects %s", fd.Message().FullName(), w.message)
	}
	return nil
}
