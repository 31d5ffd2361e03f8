package webhookrest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"google.golang.org/protobuf/proto"

	"usersd/handlers/codec"
	"usersd/users"
)

// decodeOptionalBody is DecodeBody for a custom method whose body may be left out: a request
// without one (no Content-Type and nothing sent) leaves m as it is.
func (f *face) decodeOptionalBody(r *http.Request, m proto.Message) error {
	if r.ContentLength == 0 {
		return nil
	}
	if r.Header.Get("Content-Type") == "" {
		first, err := io.ReadAll(io.LimitReader(r.Body, 1))
		if err == nil && len(first) == 0 {
			return nil
		}
	}
	return f.rest.DecodeBody(r, m)
}

// writeMessage answers with the protojson form of m.
func (f *face) writeMessage(w http.ResponseWriter, r *http.Request, status int, m proto.Message) error {
	body, err := codec.MarshalJSON(m)
	if err != nil {
		return fmt.Errorf("encode %T: %w", m, err)
	}
	return f.rest.WriteJSON(w, r, status, body)
}

// checkBodyID refuses a body whose id names another resource than the path.
func checkBodyID(inBody, inPath int32) error {
	if inBody != 0 && inBody != inPath {
		return users.InvalidField("id", "id %d in the body does not match %d in the path; leave it out or make it equal", inBody, inPath)
	}
	return nil
}

// hasMember reports whether body, a JSON object the codec accepted, has a member of one of names.
func hasMember(body []byte, names ...string) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return false
	}
	for _, name := range names {
		if _, ok := members[name]; ok {
			return true
		}
	}
	return false
}
