package openapi

import (
	"context"
	"io/fs"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"google.golang.org/protobuf/reflect/protoreflect"

	usersv1 "usersd/gen/users/v1"
	"usersd/users"
)

func load(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(mustRead(t, "openapi.json"))
	if err != nil {
		t.Fatalf("openapi.json does not load: %v", err)
	}
	return doc
}

func TestTheDocumentIsValidOpenAPI31(t *testing.T) {
	doc := load(t)
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.json declares OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
}

// Every schema of a message describes each of its fields and nothing else (request schemas too:
// the service accepts output-only fields in a body and ignores them, whatever their values, so
// those are readOnly and untyped there). Names are protojson's, and each type is
// the JSON form of the field's kind.
func TestSchemasDescribeTheProtoMessages(t *testing.T) {
	doc := load(t)
	for _, tc := range []struct {
		schema  string
		message protoreflect.MessageDescriptor
	}{
		{"User", (&usersv1.User{}).ProtoReflect().Descriptor()},
		{"UserWrite", (&usersv1.User{}).ProtoReflect().Descriptor()},
		{"UserPatch", (&usersv1.User{}).ProtoReflect().Descriptor()},
		{"Post", (&usersv1.Post{}).ProtoReflect().Descriptor()},
		{"PostWrite", (&usersv1.Post{}).ProtoReflect().Descriptor()},
		{"BatchGetUsersResponse", (&usersv1.BatchGetUsersResponse{}).ProtoReflect().Descriptor()},
		{"CreateUserRequest", (&usersv1.CreateUserRequest{}).ProtoReflect().Descriptor()},
		{"BatchCreateUsersRequest", (&usersv1.BatchCreateUsersRequest{}).ProtoReflect().Descriptor()},
		{"BatchCreateUsersResponse", (&usersv1.BatchCreateUsersResponse{}).ProtoReflect().Descriptor()},
		{"BatchDeleteUsersRequest", (&usersv1.BatchDeleteUsersRequest{}).ProtoReflect().Descriptor()},
		{"BatchDeleteUsersResponse", (&usersv1.BatchDeleteUsersResponse{}).ProtoReflect().Descriptor()},
		{"Webhook", (&usersv1.Webhook{}).ProtoReflect().Descriptor()},
		{"WebhookWrite", (&usersv1.Webhook{}).ProtoReflect().Descriptor()},
		{"WebhookPatch", (&usersv1.Webhook{}).ProtoReflect().Descriptor()},
		{"WebhookDelivery", (&usersv1.WebhookDelivery{}).ProtoReflect().Descriptor()},
		{"RotateWebhookSecretRequest", (&usersv1.RotateWebhookSecretRequest{}).ProtoReflect().Descriptor()},
		{"ReplayWebhookRequest", (&usersv1.ReplayWebhookRequest{}).ProtoReflect().Descriptor()},
	} {
		t.Run(tc.schema, func(t *testing.T) {
			ref := doc.Components.Schemas[tc.schema]
			if ref == nil || ref.Value == nil {
				t.Fatalf("no schema %s", tc.schema)
			}
			schema := ref.Value
			if schema.AdditionalProperties.Has == nil || *schema.AdditionalProperties.Has {
				t.Errorf("%s allows properties it does not name; the service refuses unknown fields and never writes one", tc.schema)
			}
			fields := tc.message.Fields()
			for i := range fields.Len() {
				f := fields.Get(i)
				prop := schema.Properties[f.JSONName()]
				if prop == nil {
					t.Errorf("%s has no property %q for field %s", tc.schema, f.JSONName(), f.FullName())
					continue
				}
				if users.IsOutputOnly(f) && !prop.Value.ReadOnly {
					t.Errorf("%s.%s is output only (field %s), so it must be readOnly", tc.schema, f.JSONName(), f.FullName())
				}
				types := prop.Value.Type.Slice()
				if ignoredWhateverItsValue(tc.schema, f) {
					if len(types) != 0 {
						t.Errorf("%s.%s has type %v, want none: a write ignores the output-only field %s whatever its value", tc.schema, f.JSONName(), types, f.FullName())
					}
					continue
				}
				wantType, wantFormat := jsonType(t, f)
				if !slices.Contains(types, wantType) || len(types) > 2 || len(types) == 2 && !slices.Contains(types, "null") {
					t.Errorf("%s.%s has type %v, want %s (field %s)", tc.schema, f.JSONName(), types, wantType, f.FullName())
				}
				if f.IsMap() {
					values := prop.Value.AdditionalProperties.Schema
					if values == nil || values.Value == nil || !slices.Contains(values.Value.Type.Slice(), "string") {
						t.Errorf("%s.%s must say its values are strings (field %s)", tc.schema, f.JSONName(), f.FullName())
					}
				}
				if wantFormat != "" && prop.Value.Format != wantFormat && schemaAnswers(tc.schema) {
					t.Errorf("%s.%s has format %q, want %q", tc.schema, f.JSONName(), prop.Value.Format, wantFormat)
				}
			}
			for name := range schema.Properties {
				if fields.ByJSONName(name) == nil {
					t.Errorf("%s has property %q, which %s does not have", tc.schema, name, tc.message.FullName())
				}
			}
		})
	}
}

// pathBound are the output-only fields that a request schema still types: a write compares them
// with its path (a replace or patch with the user's id, a new post with its user's), so a value
// that is not an id is refused. UserWrite is also the body of a create, which ignores the id.
var pathBound = map[string]protoreflect.Name{"UserPatch": "id", "PostWrite": "user_id", "WebhookPatch": "id"}

// ignoredWhateverItsValue reports whether a write with the request schema named schema ignores
// field f whatever its value (AIP-203), which the schema then leaves untyped: the REST writes drop
// such members before decoding (handlers/output_only.go).
func ignoredWhateverItsValue(schema string, f protoreflect.FieldDescriptor) bool {
	return !schemaAnswers(schema) && users.IsOutputOnly(f) && pathBound[schema] != f.Name()
}

// schemaAnswers reports whether the schema describes answers, whose formats are exact; request
// schemas are not held to them (their output-only fields are mostly untyped, see
// ignoredWhateverItsValue).
func schemaAnswers(name string) bool {
	return name == "User" || name == "Post" || name == "Webhook" || name == "WebhookDelivery"
}

// jsonType is the JSON Schema type and format of a field's protojson form.
func jsonType(t *testing.T, f protoreflect.FieldDescriptor) (typ, format string) {
	t.Helper()
	if f.IsMap() && f.MapKey().Kind() == protoreflect.StringKind && f.MapValue().Kind() == protoreflect.StringKind {
		return "object", "" // protojson writes a map<string, string> as an object of strings
	}
	if f.IsList() {
		return "array", "" // the items' schema is the item message's own, or an id's
	}
	if f.IsMap() {
		t.Fatalf("field %s: maps other than map<string, string> are not described yet", f.FullName())
	}
	switch f.Kind() {
	case protoreflect.StringKind:
		return "string", ""
	case protoreflect.Int32Kind:
		return "integer", "int32"
	case protoreflect.Int64Kind:
		return "string", "int64" // protojson writes a 64-bit integer as a string
	case protoreflect.BoolKind:
		return "boolean", ""
	case protoreflect.MessageKind:
		switch f.Message().FullName() {
		case "google.protobuf.Timestamp":
			return "string", "date-time"
		case "google.protobuf.Duration":
			return "string", "" // seconds with an s ("0.012s"), which no JSON Schema format names
		}
		return "object", "" // a message of its own, described by its own schema
	}
	t.Fatalf("field %s: kind %s has no JSON form here yet; describe it in openapi.json and in this test", f.FullName(), f.Kind())
	return "", ""
}

func mustRead(t *testing.T, name string) []byte {
	b, err := fs.ReadFile(FS, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
