// Package scim is usersd's SCIM 2.0 face (RFC 7643 and 7644): the /scim/v2 routes through which an
// identity provider (Microsoft Entra ID, Okta, OneLogin) provisions its users. It turns each SCIM
// request into calls of users.Service, so that every rule of the service holds on SCIM as on REST
// and RPC (validation, unique identities, entity tags, soft delete, the change log with its actor,
// watches), and it speaks SCIM's own resource format, filters, PATCH and error schema.
//
// The route table of package handlers mounts Routes behind the same credential checks, rate
// limits and error writer as every other route; WriteError is how that writer answers a SCIM
// request.
package scim

import (
	"net/http"

	"usersd/auth"

	"usersd/users"
)

// Prefix is the path under which the SCIM routes are served.
const Prefix = "/scim/v2"

// ContentType is the media type of every SCIM answer; requests may also send application/json.
const ContentType = "application/scim+json"

// The schema URNs of RFC 7643 and 7644 that usersd reads and writes.
const (
	schemaUser           = "urn:ietf:params:scim:schemas:core:2.0:User"
	schemaListResponse   = "urn:ietf:params:scim:api:messages:2.0:ListResponse"
	schemaError          = "urn:ietf:params:scim:api:messages:2.0:Error"
	schemaPatchOp        = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
	schemaSearchRequest  = "urn:ietf:params:scim:api:messages:2.0:SearchRequest"
	schemaServiceConfig  = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"
	schemaResourceType   = "urn:ietf:params:scim:schemas:core:2.0:ResourceType"
	schemaSchema         = "urn:ietf:params:scim:schemas:core:2.0:Schema"
	schemaBulkRequest    = "urn:ietf:params:scim:api:messages:2.0:BulkRequest"
	schemaBulkResponse   = "urn:ietf:params:scim:api:messages:2.0:BulkResponse"
	resourceTypeUserName = "User"
)

// MaxBodyBytes bounds a SCIM request's body: a bulk request of a thousand typical users fits.
const MaxBodyBytes = 1 << 20

// Route is one SCIM route, for the route table to mount with the scope a caller needs: users.write
// to write, users.read to read, none for the documents that describe the service to anyone.
type Route struct {
	Pattern string
	Scope   auth.Scopes
	Handler http.Handler
}

// Routes are the SCIM routes, served by svc. fail answers a request with an error: the service's
// error writer, which logs what a client must not see and calls WriteError. guard wraps each
// operation of a bulk request as the route table wraps a write (its credential, scope and rate
// limit), so that a bulk request of many writes is held to what as many requests would be.
func Routes(svc *users.Service, fail func(http.ResponseWriter, *http.Request, error), guard func(http.Handler) http.Handler) []Route {
	f := &face{svc: svc, fail: fail, guard: guard}
	return []Route{
		{Pattern: "GET " + Prefix + "/Users", Scope: auth.ScopeRead, Handler: http.HandlerFunc(f.listUsers)},
		{Pattern: "POST " + Prefix + "/Users/.search", Scope: auth.ScopeRead, Handler: http.HandlerFunc(f.searchUsers)},
		{Pattern: "POST " + Prefix + "/Users", Scope: auth.ScopeWrite, Handler: http.HandlerFunc(f.createUser)},
		{Pattern: "GET " + Prefix + "/Users/{id}", Scope: auth.ScopeRead, Handler: http.HandlerFunc(f.getUser)},
		{Pattern: "PUT " + Prefix + "/Users/{id}", Scope: auth.ScopeWrite, Handler: http.HandlerFunc(f.replaceUser)},
		{Pattern: "PATCH " + Prefix + "/Users/{id}", Scope: auth.ScopeWrite, Handler: http.HandlerFunc(f.patchUser)},
		{Pattern: "DELETE " + Prefix + "/Users/{id}", Scope: auth.ScopeWrite, Handler: http.HandlerFunc(f.deleteUser)},
		{Pattern: "POST " + Prefix + "/Bulk", Scope: auth.ScopeWrite, Handler: http.HandlerFunc(f.bulk)},
		{Pattern: "GET " + Prefix + "/ServiceProviderConfig", Handler: http.HandlerFunc(f.serviceProviderConfig)},
		{Pattern: "GET " + Prefix + "/ResourceTypes", Handler: http.HandlerFunc(f.resourceTypes)},
		{Pattern: "GET " + Prefix + "/ResourceTypes/{name}", Handler: http.HandlerFunc(f.resourceType)},
		{Pattern: "GET " + Prefix + "/Schemas", Handler: http.HandlerFunc(f.schemas)},
		{Pattern: "GET " + Prefix + "/Schemas/{id}", Handler: http.HandlerFunc(f.schema)},
	}
}

// face serves the SCIM routes.
type face struct {
	svc   *users.Service
	fail  func(http.ResponseWriter, *http.Request, error)
	guard func(http.Handler) http.Handler
}
