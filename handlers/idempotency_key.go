// The Idempotency-Key header of REST creates (the IETF draft): read into the request_id that the
// create RPCs carry, which the service holds to its rules.
package handlers

import (
	"net/http"
	"strings"

	"usersd/users"
)

// idempotencyKeyHeader carries a REST create's key; the create RPCs have a request_id field.
const idempotencyKeyHeader = "Idempotency-Key"

// idempotencyKey reads a REST request's Idempotency-Key header: a structured-field string (quoted,
// as the IETF draft defines it) or, as most clients send it, the bare key. No header means "".
func idempotencyKey(r *http.Request) (string, error) {
	values := r.Header.Values(idempotencyKeyHeader)
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", users.InvalidField(idempotencyKeyHeader, "send one %s header, not %d", idempotencyKeyHeader, len(values))
	}
	key := values[0]
	if strings.HasPrefix(key, `"`) {
		unquoted, ok := unquoteStructuredString(key)
		if !ok {
			return "", users.InvalidField(idempotencyKeyHeader, `%s %s is not a valid quoted string: "...", with \" and \\ the only escapes`, idempotencyKeyHeader, key)
		}
		key = unquoted
	}
	if key == "" {
		return "", users.InvalidField(idempotencyKeyHeader, "%s is empty", idempotencyKeyHeader)
	}
	return key, users.CheckRequestID(idempotencyKeyHeader, key)
}

// unquoteStructuredString reads a structured-field string (RFC 8941 section 3.3.3): in quotes, with
// backslash escaping only a quote or a backslash.
func unquoteStructuredString(quoted string) (string, bool) {
	if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	inner := quoted[1 : len(quoted)-1]
	for i := 0; i < len(inner); i++ {
		switch c := inner[i]; c {
		case '"':
			return "", false // an unescaped quote ends the string before its end
		case '\\':
			i++
			if i == len(inner) || inner[i] != '"' && inner[i] != '\\' {
				return "", false
			}
			b.WriteByte(inner[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}
