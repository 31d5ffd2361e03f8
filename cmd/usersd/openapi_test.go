package main

import (
	"bytes"
	"net/http"
	"testing"

	"usersd/internal/apitest"
)

func TestTheOpenAPIDocumentIsServed(t *testing.T) {
	s := startServer(t)
	for _, tr := range apitest.Transports {
		t.Run(tr.Name, func(t *testing.T) {
			res := s.Do(t, tr.Client, request{Method: "GET", Path: "/openapi.json"})
			if res.Status != http.StatusOK || !bytes.Equal(res.Body, apitest.OpenAPIDocument()) {
				t.Fatalf("GET /openapi.json: %d, %d bytes; want 200 and the embedded document (%d bytes)", res.Status, len(res.Body), len(apitest.OpenAPIDocument()))
			}
			if got := res.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q, want application/json", got)
			}
			tag := res.Header.Get("ETag")
			again := s.Do(t, tr.Client, request{Method: "GET", Path: "/openapi.json", Header: map[string]string{"If-None-Match": tag}})
			if tag == "" || again.Status != http.StatusNotModified || len(again.Body) != 0 {
				t.Fatalf("GET /openapi.json with If-None-Match %q: %d with %d bytes, want 304 without a body", tag, again.Status, len(again.Body))
			}
		})
	}
}
