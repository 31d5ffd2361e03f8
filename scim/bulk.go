package scim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// maxBulkOperations is the most operations one bulk request carries, as ServiceProviderConfig says.
const maxBulkOperations = 1000

// bulkRequest is the body of POST /Bulk (RFC 7644 section 3.7).
type bulkRequest struct {
	Schemas      []string        `json:"schemas"`
	FailOnErrors *int            `json:"failOnErrors"`
	Operations   []bulkOperation `json:"Operations"`
}

type bulkOperation struct {
	Method  string          `json:"method"`
	BulkID  string          `json:"bulkId"`
	Version string          `json:"version"`
	Path    string          `json:"path"`
	Data    json.RawMessage `json:"data"`
}

// bulk runs the operations in order, each as the request of its own that it stands for would run
// (so every rule of that route holds), and answers the result of each. As RFC 7644 says, a bulk
// request is not one transaction: each operation succeeds or fails alone, and the request stops
// once failOnErrors operations have failed. A later operation may name a user that an earlier one
// created by "bulkId:" and its bulkId.
func (f *face) bulk(w http.ResponseWriter, r *http.Request) {
	var in bulkRequest
	if err := readBody(w, r, &in); err != nil {
		f.fail(w, r, err)
		return
	}
	if !hasSchema(in.Schemas, schemaBulkRequest) {
		f.fail(w, r, refuse(typeInvalidValue, "schemas must hold %s", schemaBulkRequest))
		return
	}
	if len(in.Operations) > maxBulkOperations {
		f.fail(w, r, &Error{Status: http.StatusRequestEntityTooLarge,
			Detail: "a bulk request holds at most " + strconv.Itoa(maxBulkOperations) + " operations, not " + strconv.Itoa(len(in.Operations))})
		return
	}
	if in.FailOnErrors != nil && *in.FailOnErrors < 1 {
		f.fail(w, r, refuse(typeInvalidValue, "failOnErrors must be at least 1, not %d", *in.FailOnErrors))
		return
	}
	seen := map[string]bool{}
	for i, op := range in.Operations {
		if op.BulkID != "" && seen[op.BulkID] {
			f.fail(w, r, refuse(typeInvalidValue, "Operations[%d]: bulkId %q is used twice", i, op.BulkID))
			return
		}
		seen[op.BulkID] = true
	}
	ids := map[string]string{} // bulkId to the id of the user its operation created
	results := make([]any, 0, len(in.Operations))
	failed := 0
	for _, op := range in.Operations {
		if in.FailOnErrors != nil && failed >= *in.FailOnErrors {
			break
		}
		result := f.bulkOperation(r, op, ids)
		if status, _ := strconv.Atoi(result["status"].(string)); status >= 400 {
			failed++
		}
		results = append(results, result)
	}
	writeJSON(w, http.StatusOK, map[string]any{"schemas": []string{schemaBulkResponse}, "Operations": results})
}

// bulkOperation runs one operation and answers its result.
func (f *face) bulkOperation(r *http.Request, op bulkOperation, ids map[string]string) map[string]any {
	method := strings.ToUpper(op.Method)
	result := map[string]any{"method": method}
	if op.BulkID != "" {
		result["bulkId"] = op.BulkID
	}
	answer := func(err *Error) map[string]any {
		result["status"] = strconv.Itoa(err.Status)
		body := map[string]any{"schemas": []string{schemaError}, "status": strconv.Itoa(err.Status), "detail": err.Detail}
		if err.Type != "" {
			body["scimType"] = err.Type
		}
		result["response"] = body
		return result
	}
	var handler http.HandlerFunc
	var id string
	switch {
	case method == http.MethodPost && op.Path == "/Users":
		if op.BulkID == "" {
			return answer(refuse(typeInvalidValue, "a POST in a bulk request needs a bulkId"))
		}
		handler = f.createUser
	case strings.HasPrefix(op.Path, "/Users/") && (method == http.MethodPut || method == http.MethodPatch || method == http.MethodDelete):
		id = strings.TrimPrefix(op.Path, "/Users/")
		if ref, ok := strings.CutPrefix(id, "bulkId:"); ok {
			if id, ok = ids[ref]; !ok {
				return answer(&Error{Status: http.StatusConflict, Type: typeInvalidValue, Detail: "no operation before this one created bulkId " + ref})
			}
		}
		handler = map[string]http.HandlerFunc{http.MethodPut: f.replaceUser, http.MethodPatch: f.patchUser, http.MethodDelete: f.deleteUser}[method]
	default:
		return answer(refuse(typeInvalidPath, "a bulk operation is POST /Users, or PUT, PATCH or DELETE /Users/{id}; not %s %s", op.Method, op.Path))
	}

	sub := r.Clone(r.Context())
	sub.Method = method
	sub.URL.Path, sub.URL.RawPath, sub.URL.RawQuery = Prefix+"/Users", "", ""
	if id != "" {
		sub.URL.Path += "/" + id
		sub.SetPathValue("id", id)
	}
	sub.Body = io.NopCloser(bytes.NewReader(op.Data))
	sub.ContentLength = int64(len(op.Data))
	sub.Header = http.Header{"Content-Type": {ContentType}}
	for _, credential := range []string{"Authorization", "X-Api-Key"} {
		if v := r.Header.Values(credential); len(v) > 0 {
			sub.Header[credential] = v
		}
	}
	if op.Version != "" {
		sub.Header.Set("If-Match", op.Version)
	}
	rec := &recorder{header: http.Header{}}
	f.guard(handler).ServeHTTP(rec, sub)

	result["status"] = strconv.Itoa(rec.status)
	if rec.status >= 400 {
		var body map[string]any
		if json.Unmarshal(rec.body.Bytes(), &body) == nil {
			result["response"] = body
		}
		return result
	}
	if v := rec.header.Get("ETag"); v != "" {
		result["version"] = v
	}
	if method == http.MethodDelete {
		result["location"] = baseURL(r) + Prefix + "/Users/" + id
	} else {
		var created struct {
			ID   string `json:"id"`
			Meta struct {
				Location string `json:"location"`
			} `json:"meta"`
		}
		if json.Unmarshal(rec.body.Bytes(), &created) == nil {
			result["location"] = created.Meta.Location
			if method == http.MethodPost {
				ids[op.BulkID] = created.ID
			}
		}
	}
	return result
}

// recorder keeps the answer of one operation of a bulk request.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rec *recorder) Header() http.Header { return rec.header }

func (rec *recorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
	}
}

func (rec *recorder) Write(b []byte) (int, error) {
	rec.WriteHeader(http.StatusOK)
	return rec.body.Write(b)
}
