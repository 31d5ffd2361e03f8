package codec

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	usersv1 "usersd/gen/users/v1"
)

// TestFastJSONPathsMatchTheSchema: the service runs correctly with a fast path switched off, so
// this test is where a schema change that switched one off is seen.
func TestFastJSONPathsMatchTheSchema(t *testing.T) {
	if userJSONMismatch != nil {
		t.Errorf("the direct User encoder is off: %v", userJSONMismatch)
	}
	if getUserRequestJSONMismatch != nil {
		t.Errorf("the direct GetUserRequest decoder is off: %v", getUserRequestJSONMismatch)
	}
}

// TestMatchFieldsNoticesSchemaChanges edits the real descriptors of User and GetUserRequest as a
// change to the proto would, and requires matchFields to refuse each edit: gen/ holds only one
// schema, so this is how the check is seen to work on the schemas it exists for.
func TestMatchFieldsNoticesSchemaChanges(t *testing.T) {
	field := func(m *descriptorpb.DescriptorProto, name string) *descriptorpb.FieldDescriptorProto {
		for _, f := range m.Field {
			if f.GetName() == name {
				return f
			}
		}
		t.Fatalf("%s has no field %s", m.GetName(), name)
		return nil
	}
	cases := []struct {
		name    string
		message string
		shape   []fieldShape
		change  func(m *descriptorpb.DescriptorProto)
	}{
		{"an unchanged User matches", "User", userJSONShapes(), nil},
		{"a new field of User", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) {
			m.Field = append(m.Field, &descriptorpb.FieldDescriptorProto{
				Name: proto.String("nickname"), Number: proto.Int32(99),
				Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			})
		}},
		{"a field of User removed", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) { m.Field = m.Field[:len(m.Field)-1] }},
		{"a field of User renumbered", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) { field(m, "etag").Number = proto.Int32(16) }},
		{"two fields of User declared the other way round", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) {
			m.Field[1], m.Field[2] = m.Field[2], m.Field[1]
		}},
		{"a json_name on a field of User", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) { field(m, "name").JsonName = proto.String("fullName") }},
		{"the id of User made int64", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) {
			field(m, "id").Type = descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum()
		}},
		{"the etag of User made bytes", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) {
			field(m, "etag").Type = descriptorpb.FieldDescriptorProto_TYPE_BYTES.Enum()
		}},
		{"the role of User made repeated", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) {
			field(m, "role").Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
		}},
		{"the role of User made optional", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) {
			m.OneofDecl = append(m.OneofDecl, &descriptorpb.OneofDescriptorProto{Name: proto.String("_role")})
			f := field(m, "role")
			f.Proto3Optional, f.OneofIndex = proto.Bool(true), proto.Int32(int32(len(m.OneofDecl)-1))
		}},
		{"the etag of User put in a oneof", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) {
			// A real oneof is declared before the synthetic ones of proto3 optional fields.
			m.OneofDecl = append([]*descriptorpb.OneofDescriptorProto{{Name: proto.String("tag")}}, m.OneofDecl...)
			for _, f := range m.Field {
				if f.OneofIndex != nil {
					f.OneofIndex = proto.Int32(f.GetOneofIndex() + 1)
				}
			}
			field(m, "etag").OneofIndex = proto.Int32(0)
		}},
		{"the active of User made a plain bool", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) {
			f := field(m, "active")
			f.Proto3Optional, f.OneofIndex = nil, nil
			m.OneofDecl = nil
		}},
		{"the labels of User made a list", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) {
			f := field(m, "labels")
			f.Type, f.TypeName = descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), nil
		}},
		{"a timestamp of User made another message", "User", userJSONShapes(), func(m *descriptorpb.DescriptorProto) {
			field(m, "updated_at").TypeName = proto.String(".google.protobuf.FieldMask")
		}},
		{"an unchanged GetUserRequest matches", "GetUserRequest", getUserRequestJSONShape, nil},
		{"a second field of GetUserRequest", "GetUserRequest", getUserRequestJSONShape, func(m *descriptorpb.DescriptorProto) {
			m.Field = append(m.Field, &descriptorpb.FieldDescriptorProto{
				Name: proto.String("view"), Number: proto.Int32(2),
				Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			})
		}},
		{"the id of GetUserRequest made sint32", "GetUserRequest", getUserRequestJSONShape, func(m *descriptorpb.DescriptorProto) {
			field(m, "id").Type = descriptorpb.FieldDescriptorProto_TYPE_SINT32.Enum()
		}},
		{"a json_name on the id of GetUserRequest", "GetUserRequest", getUserRequestJSONShape, func(m *descriptorpb.DescriptorProto) {
			field(m, "id").JsonName = proto.String("userId")
		}},
		{"the id of GetUserRequest made optional", "GetUserRequest", getUserRequestJSONShape, func(m *descriptorpb.DescriptorProto) {
			m.OneofDecl = append(m.OneofDecl, &descriptorpb.OneofDescriptorProto{Name: proto.String("_id")})
			f := field(m, "id")
			f.Proto3Optional, f.OneofIndex = proto.Bool(true), proto.Int32(0)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := protodesc.ToFileDescriptorProto(usersv1.File_users_v1_users_proto)
			var message *descriptorpb.DescriptorProto
			for _, m := range file.MessageType {
				if m.GetName() == c.message {
					message = m
				}
			}
			if message == nil {
				t.Fatalf("%s has no message %s", file.GetName(), c.message)
			}
			if c.change != nil {
				c.change(message)
			}
			fd, err := protodesc.NewFile(file, protoregistry.GlobalFiles)
			if err != nil {
				t.Fatalf("the edited proto does not build: %v", err)
			}
			err = matchFields(fd.Messages().ByName(protoreflect.Name(c.message)), c.shape)
			switch {
			case c.change == nil && err != nil:
				t.Errorf("refused the schema as it is: %v", err)
			case c.change != nil && err == nil:
				t.Errorf("accepted the edited schema")
			case err != nil:
				t.Logf("refused: %v", err)
			}
		})
	}
}
