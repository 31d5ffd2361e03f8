package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	usersv1 "usersd/gen/users/v1"
	"usersd/gen/users/v1/usersv1connect"
	"usersd/internal/apitest"
	"usersd/internal/proctest"
	"usersd/internal/tlstest"
)

// tlsClient is a client that trusts ca and speaks HTTP/2 (h2) or HTTP/1.1 only.
func tlsClient(ca *tlstest.CA, h2 bool) *http.Client {
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, Protocols: new(http.Protocols)}
	if h2 {
		transport.Protocols.SetHTTP2(true)
	} else {
		transport.Protocols.SetHTTP1(true)
	}
	return &http.Client{Transport: transport, Timeout: 10 * time.Second}
}

// TestTLSServesEveryProtocolAndTakesARenewal: with -tls-cert and -tls-key (here their variables)
// the one port serves HTTPS, HTTP/2 by ALPN and HTTP/1.1, to REST, Connect, gRPC and gRPC-Web
// alike, and to curl and grpcurl; it refuses TLS below 1.2 and plain HTTP; and a renewed
// certificate is served to the next connections without a restart.
func TestTLSServesEveryProtocolAndTakesARenewal(t *testing.T) {
	ca := tlstest.New(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := ca.Issue(t, certFile, keyFile)
	p := proctest.Start(t, []string{"USERS_TLS_CERT=" + certFile, "USERS_TLS_KEY=" + keyFile}, filepath.Join(t.TempDir(), "users.db"))
	addr := strings.TrimPrefix(p.Server.BaseURL, "http://")
	base := "https://" + addr

	// REST over both versions: a create, then its read.
	h2, h1 := tlsClient(ca, true), tlsClient(ca, false)
	req, _ := http.NewRequest("POST", base+"/users", strings.NewReader(`{"name":"Ada Lovelace"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", apitest.Key)
	res, err := h2.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || res.Proto != "HTTP/2.0" {
		t.Fatalf("REST create over HTTPS: %s %s, want 201 over HTTP/2", res.Proto, res.Status)
	}
	res, err = h1.Get(base + "/users/1")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Proto != "HTTP/1.1" {
		t.Fatalf("REST read over HTTPS: %s %s, want 200 over HTTP/1.1", res.Proto, res.Status)
	}

	// The generated client, on each RPC protocol.
	for name, opts := range map[string][]connect.ClientOption{"gRPC": {connect.WithGRPC()}, "gRPC-Web": {connect.WithGRPCWeb()}, "Connect": nil} {
		client := usersv1connect.NewUsersClient(h2, base, opts...)
		got, err := client.GetUser(context.Background(), &usersv1.GetUserRequest{Id: 1})
		if err != nil || got.GetName() != "Ada Lovelace" {
			t.Errorf("GetUser over %s on TLS: %v %v", name, got, err)
		}
	}

	// Other people's clients.
	if out, err := exec.Command("curl", "-sS", "--cacert", ca.File, "-o", "/dev/null", "-w", "%{http_version} %{http_code}", base+"/users/1").CombinedOutput(); err != nil || string(out) != "2 200" {
		t.Errorf("curl over HTTPS: %q %v, want HTTP/2 and 200", out, err)
	}
	grpcurl := exec.Command("go", "tool", "-modfile=../../tools/go.mod", "grpcurl", "-cacert", ca.File, "-d", `{"id":1}`, addr, "users.v1.Users/GetUser")
	if out, err := grpcurl.CombinedOutput(); err != nil || !strings.Contains(string(out), "Ada Lovelace") {
		t.Errorf("grpcurl over TLS: %s %v", out, err)
	}

	// What it refuses: TLS 1.1, and plain HTTP on the TLS port.
	if conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS11}); err == nil {
		conn.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}
	if res, err := http.Get("http://" + addr + "/livez"); err == nil {
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP on the TLS port: %s, want 400", res.Status)
		}
	}

	// A renewal: the next connections get the new certificate, with no restart.
	servedSerial := func() string {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool()})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := servedSerial(); got != first.String() {
		t.Fatalf("serving certificate %s, want %s", got, first)
	}
	renewed := ca.Issue(t, certFile, keyFile)
	deadline := time.Now().Add(10 * time.Second)
	for servedSerial() != renewed.String() {
		if time.Now().After(deadline) {
			t.Fatalf("still serving %s 10s after the renewal to %s", servedSerial(), renewed)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := exec.Command("curl", "-sS", "--cacert", ca.File, "-o", "/dev/null", "-w", "%{http_code}", base+"/readyz").CombinedOutput(); err != nil || string(out) != "200" {
		t.Errorf("curl after the renewal: %q %v", out, err)
	}
	if stdout, stderr, code := runBinary(t, []string{"USERS_TLS_CERT=" + certFile}, "healthcheck", "-addr", addr); code != 0 {
		t.Errorf("usersd healthcheck of the TLS server: exit %d, %s %s", code, stdout, stderr)
	}
}

// TestTheBrowserPageWorksOverTLS: the page, loaded over HTTPS from a server with its own TLS, lists
// the users through connect-web on the same origin. Chromium trusts the test's certificate by the
// hash of its public key (its option for tests), since the test CA is in no system store.
func TestTheBrowserPageWorksOverTLS(t *testing.T) {
	ca := tlstest.New(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.Issue(t, certFile, keyFile)
	pemBytes, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemBytes)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	ctx := newBrowser(t, chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])))

	p := proctest.Start(t, []string{"USERS_TLS_CERT=" + certFile, "USERS_TLS_KEY=" + keyFile}, filepath.Join(t.TempDir(), "users.db"))
	base := "https://" + strings.TrimPrefix(p.Server.BaseURL, "http://")
	client := usersv1connect.NewUsersClient(tlsClient(ca, true), base)
	withKey, call := connect.NewClientContext(t.Context())
	call.RequestHeader().Set("x-api-key", apitest.Key)
	for _, name := range []string{"Ada", "Barbara", "Claude"} {
		if _, err := client.CreateUser(withKey, &usersv1.CreateUserRequest{User: &usersv1.User{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	page := browserPage{t: t, ctx: ctx}
	page.do("open the page over HTTPS", chromedp.Navigate(base+"/"))
	page.waitFor("the users, read over HTTPS", `document.querySelectorAll("#user-rows tr[data-user-id]").length === 3 && location.protocol === "https:"`)
	if names := page.names(); strings.Join(names, ",") != "Ada,Barbara,Claude" {
		t.Fatalf("the page lists %v", names)
	}
}
