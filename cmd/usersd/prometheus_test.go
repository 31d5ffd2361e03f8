package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// prometheusPath finds a Prometheus server: USERS_TEST_PROMETHEUS, else prometheus on the PATH.
// Without one the test is skipped, saying how to run it, unless USERS_REQUIRE_PROMETHEUS=1 (CI).
func prometheusPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("USERS_TEST_PROMETHEUS")
	if path == "" {
		path = "prometheus"
	}
	found, err := exec.LookPath(path)
	if err != nil {
		proctest.MissingTool(t, "USERS_REQUIRE_PROMETHEUS", fmt.Sprintf("no Prometheus server (%v): install it (apt-get install prometheus) "+
			"or set USERS_TEST_PROMETHEUS to a prometheus binary", err))
	}
	return found
}

// startPrometheus runs a Prometheus server that scrapes target every second, and returns the
// address of its HTTP API.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	binary := prometheusPath(t)
	dir := t.TempDir()
	config := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"+
		"  - job_name: usersd\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := proctest.FreeLoopbackAddr(t)
	var output strings.Builder
	cmd := exec.Command(binary, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus' output:\n%s", output.String())
		}
	})
	return addr
}

// promQuery asks the Prometheus server at addr for an instant vector and returns each series'
// value by the value of its label.
func promQuery(t *testing.T, addr, query, label string) map[string]string {
	t.Helper()
	res, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil // not ready yet
	}
	defer res.Body.Close()
	var answer struct {
		Status string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any // [time, "value"]
			}
		}
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&answer) != nil || answer.Status != "success" {
		return nil
	}
	values := map[string]string{}
	for _, series := range answer.Data.Result {
		values[series.Metric[label]] = fmt.Sprint(series.Value[1])
	}
	return values
}

// TestPrometheusScrapesTheRequestsItCaused: a real Prometheus server scrapes the admin listener,
// and its query API then holds, per protocol, exactly the GetUser calls this test made.
func TestPrometheusScrapesTheRequestsItCaused(t *testing.T) {
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{"USERS_ADMIN_ADDR": "127.0.0.1:0"})
	admin := adminServer(t, s)
	prometheus := startPrometheus(t, strings.TrimPrefix(admin.BaseURL, "http://"))

	id := apitest.IDOf(t, s.CreateUser(t, "ada", "admin"))
	want := map[string]string{"rest": "3", "connect": "2", "grpc": "4", "grpc-web": "1"}
	for range 3 {
		if res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d", id)}); res.Status != http.StatusOK {
			t.Fatalf("GET /users/%d: %d", id, res.Status)
		}
	}
	for protocol, calls := range map[string]int{"Connect binary": 2, "gRPC": 4, "gRPC-Web": 1} {
		client := s.RPCClient(apitest.RPCProtocolNamed(t, protocol), "")
		for range calls {
			if _, err := client.GetUser(context.Background(), &usersv1.GetUserRequest{Id: int32(id)}); err != nil {
				t.Fatalf("%s GetUser: %v", protocol, err)
			}
		}
	}

	const query = `sum by (protocol) (usersd_requests_total{route=~"/users/\\{id\\}|/users.v1.Users/GetUser", code=~"200|ok"})`
	deadline := time.Now().Add(30 * time.Second)
	var got map[string]string
	for time.Now().Before(deadline) {
		got = promQuery(t, prometheus, query, "protocol")
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Prometheus has %v for\n%s\nwant %v", got, query, want)
	}
	if up := promQuery(t, prometheus, `up{job="usersd"}`, "job"); up["usersd"] != "1" {
		t.Errorf("up{job=\"usersd\"} = %v, want 1", up)
	}
}
