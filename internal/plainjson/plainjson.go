// Package plainjson encodes JSON as encoding/json does, but without escaping <, > and & for HTML.
// usersd's bodies are read by API clients and by people at a terminal, never put into HTML as they
// are; encoding/json's escapes made an error that quotes a request ("\u003ctoken\u003e") harder to
// read and changed nothing for a JSON parser.
package plainjson

import (
	"bytes"
	"encoding/json"
)

// Marshal returns the JSON encoding of v, as json.Marshal does but with <, > and & as they are.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil // Encode ends each value with a newline
}
