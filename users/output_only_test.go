package users

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	usersv1 "usersd/gen/users/v1"
)

// TestOutputOnlyFollowsTheProto holds IsOutputOnly to the proto's own words: a field of User, Post
// or Webhook is output only exactly when the comment above it says "Output only". A field added to
// the proto with that comment, and not to the lists, fails here.
func TestOutputOnlyFollowsTheProto(t *testing.T) {
	marked := outputOnlyInProtoComments(t, "../proto/users/v1/users.proto")
	for _, message := range []protoreflect.MessageDescriptor{
		(&usersv1.User{}).ProtoReflect().Descriptor(),
		(&usersv1.Post{}).ProtoReflect().Descriptor(),
		(&usersv1.Webhook{}).ProtoReflect().Descriptor(),
	} {
		fields := message.Fields()
		seen := 0
		for i := range fields.Len() {
			f := fields.Get(i)
			want, ok := marked[string(message.Name())][string(f.Name())]
			if !ok {
				t.Errorf("field %s was not found in the proto source", f.FullName())
				continue
			}
			seen++
			if got := IsOutputOnly(f); got != want {
				t.Errorf("IsOutputOnly(%s) = %v, but its comment says output only: %v", f.FullName(), got, want)
			}
		}
		if seen == 0 {
			t.Errorf("no field of %s was checked", message.FullName())
		}
	}
}

var protoField = regexp.MustCompile(`^\s*(?:repeated\s+|optional\s+)?[\w.<>, ]+\s+(\w+)\s*=\s*\d+`)

// outputOnlyInProtoComments reads, for every message of the file, whether each field's comment
// block says "Output only".
func outputOnlyInProtoComments(t *testing.T, path string) map[string]map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string]bool{}
	var message, comment string
	depth := 0
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		switch {
		case strings.HasPrefix(line, "//"):
			comment += line + " "
			continue
		case depth == 0 && strings.HasPrefix(line, "message "):
			message = strings.Fields(line)[1]
			out[message] = map[string]bool{}
		case depth == 1 && message != "":
			if m := protoField.FindStringSubmatch(line); m != nil {
				out[message][m[1]] = strings.Contains(comment, "Output only")
			}
		}
		depth += strings.Count(line, "{") - strings.Count(line, "}")
		if depth == 0 {
			message = ""
		}
		comment = ""
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
