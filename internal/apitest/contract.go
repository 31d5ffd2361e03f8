// The REST contract, checked on every request that the tests send through HTTP1Client and
// H2CClient: each answer of a route that /openapi.json describes must be one of the statuses the
// document lists for it, with the headers and body it describes; a request the document says is
// invalid must not succeed; and a JSON error anywhere else must be {"error": "..."}. The checks
// see the answer when the test has read it to the end. A test package's TestMain calls Report, to
// fail the package on any mismatch and, with -v, say what was checked.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"usersd/openapi"
)

// contract is the loaded document and what the checks found.
var contract = newContractChecker()

type contractChecker struct {
	doc    *openapi3.T
	router routers.Router
	errs   *openapi3.Schema

	mu         sync.Mutex
	validated  int                    // answers checked against an operation
	statuses   map[string]map[int]int // operation id -> status -> answers seen
	mismatches []string
}

func newContractChecker() *contractChecker {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPIDocument())
	if err != nil {
		panic(fmt.Sprintf("openapi.json does not load: %v", err))
	}
	// The document's one server is "/", relative to wherever it is served; the tests' servers run on
	// ports of their own, so operations are matched by path and method alone.
	doc.Servers = nil
	router, err := legacy.NewRouter(withVerbSegments(doc))
	if err != nil {
		panic(fmt.Sprintf("openapi.json: %v", err))
	}
	// A stream of Server-Sent Events is a string to the document's schema; checkEventStream checks
	// the data of each event.
	openapi3filter.RegisterBodyDecoder("text/event-stream", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		return string(b), err
	})
	return &contractChecker{doc: doc, router: router, errs: doc.Components.Schemas["Error"].Value, statuses: map[string]map[int]int{}}
}

// resolveComponents sets the value of every reference to a component schema inside schema, which
// was read from an extension and so was not resolved with the document.
func (c *contractChecker) resolveComponents(schema *openapi3.Schema) error {
	refs := slices.Collect(maps.Values(schema.Properties))
	refs = append(append(append(refs, schema.AnyOf...), schema.OneOf...), schema.AllOf...)
	for _, ref := range refs {
		if name, ok := strings.CutPrefix(ref.Ref, "#/components/schemas/"); ok {
			component, found := c.doc.Components.Schemas[name]
			if !found {
				return fmt.Errorf("no component schema %q", name)
			}
			ref.Value = component.Value
			continue
		}
		if ref.Value != nil {
			if err := c.resolveComponents(ref.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkEventStream checks the data of every event of a text/event-stream answer against the schema
// that the document gives in the content's x-event-data, and the data of an "error" event against
// the Error schema.
func (c *contractChecker) checkEventStream(what string, route *routers.Route, status int, body []byte) {
	content := route.Operation.Responses.Status(status).Value.Content.Get("text/event-stream")
	raw, err := json.Marshal(content.Extensions["x-event-data"])
	var schema openapi3.Schema
	if err == nil {
		err = json.Unmarshal(raw, &schema)
	}
	if err == nil {
		err = c.resolveComponents(&schema)
	}
	if err != nil {
		c.mismatch("%s: the document's x-event-data is not a schema: %v", what, err)
		return
	}
	for event := range strings.SplitSeq(string(body), "\n\n") {
		name, data := "", ""
		for line := range strings.SplitSeq(event, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = v
			}
		}
		if data == "" {
			continue // the end of the stream, or a stream cut inside an event
		}
		var value any
		if err := json.Unmarshal([]byte(data), &value); err != nil {
			c.mismatch("%s: event data %s is not JSON: %v", what, data, err)
			continue
		}
		against := &schema
		if name == "error" {
			against = c.errs
		}
		if err := against.VisitJSON(value); err != nil {
			c.mismatch("%s: event %q data %s does not match the document: %v", what, name, data, err)
		}
	}
}

// checkedTransport sends requests with next and checks each answer against the contract.
type checkedTransport struct{ next http.RoundTripper }

// CloseIdleConnections passes http.Client.CloseIdleConnections on, which does nothing for a
// transport without it: a test server's stop closes the clients' idle connections first, or its
// shutdown waits, a second for each idle h2c connection, for the client to close it.
func (c checkedTransport) CloseIdleConnections() {
	if closer, ok := c.next.(interface{ CloseIdleConnections() }); ok {
		closer.CloseIdleConnections()
	}
}

func (c checkedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if isRPCPath(r.URL.Path) || r.Method == http.MethodHead || strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		// RPCs have their own contract, the proto, and gRPC sent to any path is answered in gRPC;
		// HEAD has no body to check.
		return c.next.RoundTrip(r)
	}
	route, params := contract.findRoute(r)
	var requestBody []byte
	haveRequestBody := false
	if route != nil && r.GetBody != nil { // a body the client can send again: a copy is free to read
		if body, err := r.GetBody(); err == nil {
			requestBody, err = io.ReadAll(body)
			haveRequestBody = err == nil
			body.Close()
		}
	}
	res, err := c.next.RoundTrip(r)
	if err != nil {
		return res, err
	}
	if res.StatusCode == http.StatusRequestHeaderFieldsTooLarge {
		return res, nil // net/http's own plain-text answer, before any handler runs (docs/LIMITS.md)
	}
	res.Body = &checkedBody{ReadCloser: res.Body, done: func(body []byte) {
		if route == nil {
			contract.checkErrorBody(r, res, body)
			return
		}
		contract.check(r, route, params, requestBody, haveRequestBody, res, body)
	}}
	return res, nil
}

// isRPCPath reports whether path has the shape of an RPC, /package.Service/Method.
func isRPCPath(path string) bool {
	service, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return ok && strings.Contains(service, ".") && method != "" && !strings.Contains(method, "/")
}

// findRoute returns the operation of the document that r asks for, or nil.
func (c *contractChecker) findRoute(r *http.Request) (*routers.Route, map[string]string) {
	lookup := r
	if path, ok := verbAsSegment(r.URL.Path); ok {
		lookup = r.Clone(r.Context())
		lookup.URL.Path, lookup.URL.RawPath = path, ""
	}
	route, params, err := c.router.FindRoute(lookup)
	// The router also lets a path parameter match nothing (PUT /users as /users/{id}): that is not
	// the operation the URL names.
	if err != nil || strings.Count(route.Path, "/") != strings.Count(lookup.URL.Path, "/") {
		return nil, nil
	}
	return route, params
}

// The router matches whole segments, and a custom method (AIP-136) ends a segment with its verb
// ("/users/{id}:undelete"). It is routed as a segment of its own instead ("/users/{id}/:undelete"),
// in the document the router reads and in the path of each request it looks up.

// withVerbSegments returns a copy of doc whose custom methods' paths have their verb as a segment.
func withVerbSegments(doc *openapi3.T) *openapi3.T {
	routed := *doc
	routed.Paths = openapi3.NewPaths()
	for path, item := range doc.Paths.Map() {
		if segmented, ok := verbAsSegment(path); ok {
			path = segmented
		}
		routed.Paths.Set(path, item)
	}
	return &routed
}

// verbAsSegment moves the verb that ends path's last segment into a segment of its own; ok is false
// when the last segment has no verb.
func verbAsSegment(path string) (string, bool) {
	slash := strings.LastIndexByte(path, '/')
	colon := strings.LastIndexByte(path, ':')
	if colon <= slash+1 {
		return path, false
	}
	return path[:colon] + "/" + path[colon:], true
}

// checkedBody keeps what is read of an answer and hands it to done at the end, once.
type checkedBody struct {
	io.ReadCloser
	read bytes.Buffer
	done func(body []byte)
	once sync.Once
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read.Write(p[:n])
	if err == io.EOF {
		b.once.Do(func() { b.done(b.read.Bytes()) })
	}
	return n, err
}

func (c *contractChecker) check(r *http.Request, route *routers.Route, params map[string]string, requestBody []byte, haveRequestBody bool, res *http.Response, body []byte) {
	ctx := context.Background()
	options := &openapi3filter.Options{
		// The service ignores output-only fields in a body (docs/API.md says so); the document marks
		// them readOnly, which a strict reading forbids in requests.
		ExcludeReadOnlyValidations: true,
		ExcludeRequestBody:         !haveRequestBody,
		AuthenticationFunc:         openapi3filter.NoopAuthenticationFunc,
		MultiError:                 true,
	}
	in := &openapi3filter.RequestValidationInput{Request: r.Clone(ctx), PathParams: params, Route: route, Options: options}
	in.Request.Body = io.NopCloser(bytes.NewReader(requestBody))
	requestErr := openapi3filter.ValidateRequest(ctx, in)
	what := fmt.Sprintf("%s %s (%s)", r.Method, shorten(r.URL.RequestURI()), route.Operation.OperationID)
	if requestErr != nil && res.StatusCode < 300 {
		c.mismatch("%s answered %d to a request the document says is invalid: %v", what, res.StatusCode, requestErr)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		c.mismatch("%s: the answer %d %s does not match the document: %v", what, res.StatusCode, shorten(string(body)), err)
	}
	if res.Header.Get("Content-Type") == "text/event-stream" {
		c.checkEventStream(what, route, res.StatusCode, body)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.validated++
	if c.statuses[route.Operation.OperationID] == nil {
		c.statuses[route.Operation.OperationID] = map[int]int{}
	}
	c.statuses[route.Operation.OperationID][res.StatusCode]++
}

// checkErrorBody requires {"error": "..."} of a JSON error outside the document's operations:
// static files, misses, and methods a path does not have.
func (c *contractChecker) checkErrorBody(r *http.Request, res *http.Response, body []byte) {
	mediaType, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if res.StatusCode < 400 || mediaType != "application/json" {
		return
	}
	if err := c.errs.VisitJSON(decodeJSON(body)); err != nil {
		c.mismatch("%s %s: the error answer %d %s is not {\"error\": \"...\"}: %v", r.Method, shorten(r.URL.RequestURI()), res.StatusCode, shorten(string(body)), err)
	}
}

// shorten keeps a report readable when a test sends or gets something huge.
func shorten(s string) string {
	if len(s) > 200 {
		return s[:200] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

func decodeJSON(b []byte) any {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return string(b)
	}
	return v
}

func (c *contractChecker) mismatch(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mismatches = append(c.mismatches, fmt.Sprintf(format, args...))
}

// Report says what the checks of this test binary found, and returns false if anything did not
// match the document.
func Report(w io.Writer, verbose bool) bool { return contract.report(w, verbose) }

// report says what was checked, and returns false if anything did not match.
func (c *contractChecker) report(w io.Writer, verbose bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.mismatches {
		fmt.Fprintln(w, "openapi.json mismatch:", m)
	}
	if verbose || len(c.mismatches) > 0 {
		pairs := 0
		for _, statuses := range c.statuses {
			pairs += len(statuses)
		}
		fmt.Fprintf(w, "openapi.json: %d answers checked against %d of %d operations, %d (operation, status) pairs seen, %d mismatches\n",
			c.validated, len(c.statuses), c.operations(nil), pairs, len(c.mismatches))
		for _, op := range slices.Sorted(maps.Keys(c.statuses)) {
			fmt.Fprintf(w, "  %s: %v\n", op, c.statuses[op])
		}
	}
	return len(c.mismatches) == 0
}

// Operations counts the operations of the document, but those with a tag in except.
func Operations(except ...string) int { return contract.operations(except) }

func (c *contractChecker) operations(except []string) int {
	n := 0
	for _, item := range c.doc.Paths.Map() {
		for _, op := range item.Operations() {
			if !slices.ContainsFunc(op.Tags, func(tag string) bool { return slices.Contains(except, tag) }) {
				n++
			}
		}
	}
	return n
}

// OpenAPIDocument returns the OpenAPI document, as served.
func OpenAPIDocument() []byte {
	b, err := fs.ReadFile(openapi.FS, "openapi.json")
	if err != nil {
		panic("openapi.json is embedded in package openapi, so reading it cannot fail: " + err.Error())
	}
	return b
}
