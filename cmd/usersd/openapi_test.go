package main

import (
	"bytes"
	"net/http"
	"testing"

	"usersd/openapi"
)

func TestTheOpenAPIDocumentIsServed(t *testing.T) {
	s := startServer(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			res := s.do(t, tr.client, request{method: "GET", path: "/openapi.json"})
			if res.status != http.StatusOK || !bytes.Equal(res.body, openapi.Document()) {
				t.Fatalf("GET /openapi.json: %d, %d bytes; want 200 and the embedded document (%d bytes)", res.status, len(res.body), len(openapi.Document()))
			}
			if got := res.header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q, want application/json", got)
			}
			tag := res.header.Get("ETag")
			again := s.do(t, tr.client, request{method: "GET", path: "/openapi.json", header: map[string]string{"If-None-Match": tag}})
			if tag == "" || again.status != http.StatusNotModified || len(again.body) != 0 {
				t.Fatalf("GET /openapi.json with If-None-Match %q: %d with %d bytes, want 304 without a body", tag, again.status, len(again.body))
			}
		})
	}
}
