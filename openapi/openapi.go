// Package openapi holds the REST contract as an OpenAPI 3.1 document, openapi.json, which the
// service serves at /openapi.json. The document is written by hand, because REST differs from the
// RPCs where it matters to a client (a bare array with Link and X-Total-Count, merge patch,
// conditional and idempotency headers); tests hold it to the code from both sides: its schemas
// to the messages of proto/users/v1/users.proto, its operations to the routes the service
// registers, and every answer of the end-to-end REST tests to the document (cmd/usersd).
package openapi

import (
	"embed"
	"io/fs"
)

//go:embed openapi.json
var files embed.FS

// FS holds openapi.json, to be served at the URL root.
var FS fs.FS = files
