package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"usersd/internal/proctest"
)

// TestTheContainerImageRecipe checks the Dockerfile as far as a machine without a container
// runtime can: two stages, a final base with nothing but the binary, a user without privileges,
// and a build that gives a static binary (CGO_ENABLED=0, -trimpath), which is how the tests' one
// binary is built (proctest.Binary), and that binary is checked: no dynamic loader, no shared library,
// and it runs. (CI also lints the file with dockerfilelint.)
func TestTheContainerImageRecipe(t *testing.T) {
	recipe, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(recipe)
	froms := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(text, -1)
	if len(froms) != 2 || !strings.HasPrefix(froms[1][1], "gcr.io/distroless/static") {
		t.Fatalf("stages %v; want a build stage and a distroless static one", froms)
	}
	goMod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(goMod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	if !strings.HasPrefix(froms[0][1], "golang:"+string(goLine[1])+"-") {
		t.Fatalf("the build stage is %s; want golang:%s-..., the Go that go.mod asks for", froms[0][1], goLine[1])
	}
	user := regexp.MustCompile(`(?m)^USER (\S+)`).FindStringSubmatch(text)
	if user == nil || strings.HasPrefix(user[1], "root") || strings.HasPrefix(user[1], "0") {
		t.Fatalf("USER %v; want a user without privileges", user)
	}
	if !strings.Contains(text, `HEALTHCHECK `) || !strings.Contains(text, `CMD ["/usersd", "healthcheck"]`) {
		t.Fatal("no HEALTHCHECK that runs usersd healthcheck: the base has nothing else to write one with")
	}
	build := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*-trimpath.*) -o \S+ (\./cmd/usersd)`).FindStringSubmatch(text)
	if build == nil || !strings.Contains(text, `ENTRYPOINT ["/usersd"]`) {
		t.Fatal("no static, path-free build of ./cmd/usersd as the entry point")
	}

	// The tests' one binary is built the image's way (see proctest.Binary): check that one.
	bin := proctest.Binary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the image's binary needs a dynamic loader: it would not run on a static base")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("the image's binary needs %v", libs)
	}
	if out, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(out), "usersd "+proctest.Version+",") {
		t.Fatalf("the image's binary says %q (%v)", out, err)
	}
}

// TestTheSystemdUnit checks deploy/usersd.service with systemd's own tools: it verifies cleanly,
// and its sandbox rates at most 2.0 on systemd-analyze security's scale (0 is the tightest, 10
// none at all; "OK" is below 4).
func TestTheSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		proctest.MissingTool(t, "USERS_REQUIRE_SYSTEMD", "no systemd-analyze to check the unit with (apt-get install systemd)")
	}
	unit, err := os.ReadFile("../../deploy/usersd.service")
	if err != nil {
		t.Fatal(err)
	}
	// The unit names the installed binary; verify needs one that is there.
	checked := filepath.Join(t.TempDir(), "usersd.service")
	os.WriteFile(checked, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/usersd", proctest.Binary(t))), 0o644)
	out, err := exec.Command(analyze, "verify", checked).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, _ = exec.Command(analyze, "security", "--offline=true", checked).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for usersd.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security said:\n%s", out)
	}
	if exposure, _ := strconv.ParseFloat(string(m[1]), 64); exposure > 2.0 {
		t.Fatalf("the unit's exposure is %.1f; want at most 2.0:\n%s", exposure, out)
	}
	t.Logf("exposure %s", m[1])
}
