package main

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/durationpb"

	"usersd/internal/apitest"
)

// TestConnectESDecodesEveryErrorsDetails runs web/connect-es-errors/errors-test.ts, on the page's
// generated client and connect-es's Connect and gRPC-Web transports, against the binary: the
// service's errors reach a TypeScript client with their google.rpc.ErrorInfo and BadRequest
// details intact, decoded by the descriptors of google/rpc/error_details.proto, which this test
// hands over from the Go module that the service builds them with.
func TestConnectESDecodesEveryErrorsDetails(t *testing.T) {
	node, bin := webTools(t, "esbuild")
	_, s, _ := startProcess(t, filepath.Join(t.TempDir(), "users.db"))
	work := t.TempDir()
	bundle := exec.Command(filepath.Join(bin, "esbuild"), "errors-test.ts", "--bundle", "--platform=node",
		"--format=esm", "--outfile="+filepath.Join(work, "errors-test.mjs"))
	bundle.Dir = "../../web/connect-es-errors"
	if out, err := bundle.CombinedOutput(); err != nil {
		t.Fatalf("bundle the client: %v\n%s", err, out)
	}
	run := exec.Command(node, "errors-test.mjs")
	run.Dir = work
	run.Env = append(os.Environ(), "USERSD_URL="+s.BaseURL, "USERSD_KEY="+apitest.Key,
		"USERSD_ERROR_DETAILS="+errorDetailsDescriptors(t))
	out, err := run.CombinedOutput()
	if err != nil || strings.Count(string(out), ": ok") != 2 {
		t.Fatalf("the connect-es client: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

// errorDetailsDescriptors is the FileDescriptorSet of google/rpc/error_details.proto and what it
// imports, in base64.
func errorDetailsDescriptors(t *testing.T) string {
	t.Helper()
	var set descriptorpb.FileDescriptorSet
	for _, file := range []protoreflect.FileDescriptor{durationpb.File_google_protobuf_duration_proto, errdetails.File_google_rpc_error_details_proto} {
		set.File = append(set.File, protodesc.ToFileDescriptorProto(file))
	}
	encoded, err := proto.Marshal(&set)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(encoded)
}
