package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// scimSuiteLevels are the requirement levels that must pass: the suite's SHOULD and MAY results
// are reported, not required.
var scimSuiteLevels = []string{"MUST", "MUST NOT", "SHALL", "SHALL NOT"}

// TestTheSCIMComplianceSuitePasses runs the open SCIM compliance suite (github.com/scim2/test-suite,
// which the module proxy does not serve: USERS_SCIM_SUITE names the folder of an unmodified copy,
// run from there so that its dependencies stay out of usersd's go.mod) against the real binary,
// with every optional feature usersd serves forced on. Every MUST, MUST NOT, SHALL and SHALL NOT
// requirement passes, except those scim/testdata/compliance-known-failing.txt lists, each with
// why, which must fail. USERS_SCIM_REPORT=FILE keeps the suite's report.
//
// The binary runs with -deleted-retention 0: the suite creates users with the same emails in one
// test after another, deleting each, and a soft-deleted user keeps its email until it is purged.
func TestTheSCIMComplianceSuitePasses(t *testing.T) {
	suite := os.Getenv("USERS_SCIM_SUITE")
	if suite == "" {
		proctest.MissingTool(t, "USERS_REQUIRE_SCIM_SUITE", "USERS_SCIM_SUITE names no copy of the SCIM compliance suite")
	}
	known := knownFailing(t, filepath.Join("..", "..", "scim", "testdata", "compliance-known-failing.txt"))
	p := proctest.Start(t, nil, filepath.Join(t.TempDir(), "users.db"), "-deleted-retention", "0")

	report := filepath.Join(t.TempDir(), "report.txt")
	if keep := os.Getenv("USERS_SCIM_REPORT"); keep != "" {
		report, _ = filepath.Abs(keep)
	}
	cmd := exec.CommandContext(t.Context(), "go", "test", "./compliance/", "-count=1",
		"-scim.url="+p.BaseURL+"/scim/v2", "-scim.token="+apitest.Key,
		"-scim.force=filter,patch,sort,etag,bulk", "-scim.report="+report)
	cmd.Dir = suite
	// The suite's test package links a database through cgo, even when it runs against a server.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	start := time.Now()
	out, runErr := cmd.CombinedOutput() // fails whenever a requirement fails: the report says which
	jsonReport := strings.TrimSuffix(report, filepath.Ext(report)) + ".json"
	raw, err := os.ReadFile(jsonReport)
	if err != nil {
		t.Fatalf("the suite wrote no report (%v; go test: %v):\n%s", err, runErr, lastLines(out, 40))
	}
	var result struct {
		ByLevel  map[string]struct{ Pass, Fail, Warn int } `json:"byLevel"`
		Failures []struct {
			ID, Level, Message string
		} `json:"failures"`
		Passed []struct{ ID string } `json:"passed"`
	}
	if err := json.Unmarshal(raw, &result); err != nil {
		t.Fatalf("the suite's report %s: %v", jsonReport, err)
	}
	failed := map[string]bool{}
	for _, f := range result.Failures {
		if !slices.Contains(scimSuiteLevels, f.Level) {
			continue
		}
		failed[f.ID] = true
		if !known[f.ID] {
			t.Errorf("%s (%s) fails: %s", f.ID, f.Level, f.Message)
		}
	}
	for id := range known {
		if !failed[id] {
			t.Errorf("%s is listed as failing but did not fail: take it off the list", id)
		}
	}
	if len(result.Passed) == 0 {
		t.Errorf("no requirement passed; the suite's output:\n%s", lastLines(out, 40))
	}
	for _, level := range append(scimSuiteLevels, "SHOULD", "SHOULD NOT") {
		counts := result.ByLevel[level]
		t.Logf("%-10s %d passed, %d failed, %d warned", level, counts.Pass, counts.Fail, counts.Warn)
	}
	t.Logf("the suite ran in %s", time.Since(start).Round(time.Second))
}

// knownFailing reads the list of requirements that fail deliberately: one id a line, then "#"
// and why; blank lines and lines that start with "#" are comments. Every id needs its reason.
func knownFailing(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	known := map[string]bool{}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, why, _ := strings.Cut(line, "#")
		if strings.TrimSpace(why) == "" {
			t.Errorf("%s: %q says not why it fails", path, line)
		}
		known[strings.TrimSpace(id)] = true
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	return known
}

// lastLines is the last n lines of out.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
