package scim

import (
	"net/http"
	"strings"
)

// The discovery documents (RFC 7644 section 4): what usersd's SCIM service supports, exactly.
// They describe the service only, and answer anyone, as /openapi.json does.

func (f *face) serviceProviderConfig(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"schemas":        []string{schemaServiceConfig},
		"patch":          map[string]any{"supported": true},
		"bulk":           map[string]any{"supported": true, "maxOperations": maxBulkOperations, "maxPayloadSize": MaxBodyBytes},
		"filter":         map[string]any{"supported": true, "maxResults": 1000},
		"changePassword": map[string]any{"supported": false},
		"sort":           map[string]any{"supported": true},
		"etag":           map[string]any{"supported": true},
		"authenticationSchemes": []any{map[string]any{
			"type": "oauthbearertoken", "name": "Bearer token",
			"description": "An OpenID Connect access token, or a usersd API key, in Authorization: Bearer",
			"primary":     true,
		}},
		"meta": map[string]any{"resourceType": "ServiceProviderConfig", "location": baseURL(r) + Prefix + "/ServiceProviderConfig"},
	})
}

// userResourceType is the one resource type usersd serves.
func userResourceType(base string) map[string]any {
	return map[string]any{
		"schemas": []string{schemaResourceType}, "id": resourceTypeUserName, "name": resourceTypeUserName,
		"endpoint": "/Users", "description": "A user of usersd", "schema": schemaUser,
		"meta": map[string]any{"resourceType": "ResourceType", "location": base + Prefix + "/ResourceTypes/User"},
	}
}

func (f *face) resourceTypes(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, listOf([]any{userResourceType(baseURL(r))}))
}

func (f *face) resourceType(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.PathValue("name"), resourceTypeUserName) {
		f.fail(w, r, &Error{Status: http.StatusNotFound, Detail: "no resource type " + r.PathValue("name") + "; usersd serves User"})
		return
	}
	writeJSON(w, http.StatusOK, userResourceType(baseURL(r)))
}

func (f *face) schemas(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, listOf([]any{userSchema(baseURL(r))}))
}

func (f *face) schema(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.PathValue("id"), schemaUser) {
		f.fail(w, r, &Error{Status: http.StatusNotFound, Detail: "no schema " + r.PathValue("id") + "; usersd serves " + schemaUser})
		return
	}
	writeJSON(w, http.StatusOK, userSchema(baseURL(r)))
}

// listOf is a ListResponse of every one of resources.
func listOf(resources []any) map[string]any {
	return map[string]any{"schemas": []string{schemaListResponse}, "totalResults": len(resources),
		"startIndex": 1, "itemsPerPage": len(resources), "Resources": resources}
}

// attribute describes one attribute of the User schema (RFC 7643 section 7).
func attribute(name, typ, description string, required, caseExact bool, mutability, uniqueness string, subs ...map[string]any) map[string]any {
	a := map[string]any{"name": name, "type": typ, "multiValued": false, "description": description,
		"required": required, "caseExact": caseExact, "mutability": mutability, "returned": "default", "uniqueness": uniqueness}
	if len(subs) > 0 {
		a["subAttributes"] = subs
	}
	return a
}

// multiValued is a as a multi-valued attribute, of which usersd keeps one value.
func multiValued(a map[string]any) map[string]any {
	a["multiValued"] = true
	return a
}

// userSchema is the core User schema as far as usersd keeps it: the attributes it stores, and no
// others, so that a client knows that the rest is not kept.
func userSchema(base string) map[string]any {
	return map[string]any{
		"schemas": []string{schemaSchema}, "id": schemaUser, "name": "User", "description": "A user of usersd",
		"attributes": []any{
			attribute("userName", "string", "Unique among users, ignoring case", true, false, "readWrite", "server"),
			attribute("name", "complex", "The user's name", false, false, "readWrite", "none",
				attribute("formatted", "string", "The whole name; the same as displayName", false, true, "readWrite", "none"),
				attribute("givenName", "string", "The given name", false, true, "readWrite", "none"),
				attribute("familyName", "string", "The family name", false, true, "readWrite", "none")),
			attribute("displayName", "string", "The name shown to people", false, true, "readWrite", "none"),
			attribute("active", "boolean", "Whether the user may sign in", false, false, "readWrite", "none"),
			attribute("externalId", "string", "The provisioning system's id of the user; unique", false, true, "readWrite", "server"),
			multiValued(attribute("emails", "complex", "One email, unique among users ignoring case; the primary one is kept", false, false, "readWrite", "none",
				attribute("value", "string", "The address", false, false, "readWrite", "server"),
				attribute("type", "string", "Always work", false, false, "readWrite", "none"),
				attribute("primary", "boolean", "Always true", false, false, "readWrite", "none"))),
			multiValued(attribute("roles", "complex", "One role; the primary one is kept", false, false, "readWrite", "none",
				attribute("value", "string", "The role", false, true, "readWrite", "none"),
				attribute("primary", "boolean", "Always true", false, false, "readWrite", "none"))),
		},
		"meta": map[string]any{"resourceType": "Schema", "location": base + Prefix + "/Schemas/" + schemaUser},
	}
}
