package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"usersd/internal/apitest"
	"usersd/internal/proctest"
)

// runBinary runs the real binary with args and env (NAME=value) added to a bare environment, and
// returns what it printed on each stream and its exit code.
func runBinary(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(proctest.Binary(t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	cmd.Dir = t.TempDir() // a mistaken -db would land here, not in the repository
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return out.String(), errOut.String(), exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

// TestHelpIsOnStdoutAndNamesEverySetting: -h prints the help on stdout and exits 0, as Go's own
// tools do, starting with what the program is and naming every flag's variable, and the one
// setting that only a variable holds.
func TestHelpIsOnStdoutAndNamesEverySetting(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help", "help"} {
		stdout, stderr, code := runBinary(t, nil, arg)
		if code != 0 || stderr != "" {
			t.Fatalf("%s: exit %d, stderr %q", arg, code, stderr)
		}
		if !strings.HasPrefix(stdout, description+"\n") {
			t.Fatalf("%s: the help starts %q", arg, stdout[:min(len(stdout), 100)])
		}
		flags := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(stdout, -1)
		if len(flags) < 25 {
			t.Fatalf("%s: only %d flags in the help", arg, len(flags))
		}
		// The flag package takes a back-quoted word of a usage text as the name of the flag's value:
		// each value's name must be one word, not a piece of the sentence.
		for _, line := range regexp.MustCompile(`(?m)^  -[a-z0-9-]+ (.+)$`).FindAllStringSubmatch(stdout, -1) {
			if strings.Contains(line[1], " ") {
				t.Errorf("%s: a flag's value is named %q", arg, line[1])
			}
		}
		for _, want := range []string{"USERS_API_KEYS\n", "usersd version", "(env USERS_DB)", "(env USERS_ANSWER_MEMORY)"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%s: the help does not name %q", arg, want)
			}
		}
	}
}

// TestAMistakeIsOneLine: a bad flag or value, or a key that will not do, is one line on stderr
// and exit 1, with no help around it, and nothing on stdout.
func TestAMistakeIsOneLine(t *testing.T) {
	keysFile := filepath.Join(t.TempDir(), "keys")
	os.WriteFile(keysFile, []byte("# ops\nshort\n"), 0o600)
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"an unknown flag", nil, []string{"-nope"}, "flag provided but not defined: -nope"},
		{"a bad value", nil, []string{"-max-watchers", "many"}, `invalid value "many" for flag -max-watchers`},
		{"a flag without its value", nil, []string{"-addr"}, "flag needs an argument: -addr"},
		{"a bad variable", []string{"USERS_REQUEST_TIMEOUT=soon"}, nil, "USERS_REQUEST_TIMEOUT"},
		{"arguments after the flags", nil, []string{"-db", ":memory:", "serve"}, "unexpected arguments"},
		{"a certificate without its key", nil, []string{"-db", ":memory:", "-tls-cert", "cert.pem"}, "-tls-cert and -tls-key go together"},
		{"a certificate that is not there", nil, []string{"-db", ":memory:", "-tls-cert", "/no/such/cert.pem", "-tls-key", "/no/such/key.pem"}, "TLS: stat /no/such/cert.pem"},
		{"keys that are only separators", []string{"USERS_API_KEYS= , "}, []string{"-db", ":memory:"}, "USERS_API_KEYS is set but holds no key"},
		{"a short key", []string{"USERS_API_KEYS=dev-key"}, []string{"-db", ":memory:"}, "key 1 of 1 has 7 characters; a key needs at least 16"},
		{"a short key in the file", nil, []string{"-db", ":memory:", "-api-keys-file", keysFile}, "line 2: the key has 5 characters"},
		{"version with arguments", nil, []string{"version", "now"}, "usersd version takes no arguments"},
		{"a libpq connection string as -db", nil, []string{"-db", "host=localhost user=app dbname=users"}, "libpq connection string"},
		{"a URL of another database", []string{"USERS_DB=mysql://app@localhost/users"}, nil, "only postgres:// and postgresql:// URLs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runBinary(t, c.env, c.args...)
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if code != 1 || stdout != "" || len(lines) != 1 || !strings.HasPrefix(stderr, "usersd: ") || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and one line on stderr saying %q", code, stdout, stderr, c.want)
			}
			if strings.Contains(stderr, "dev-key") || strings.Contains(stderr, "short\n") {
				t.Fatalf("the refused key is in the message: %q", stderr)
			}
		})
	}
}

// TestVersion: -version and `usersd version` print one line, the version, the commit and the Go
// version, and exit 0; a release build's stamp is the version.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"version"}} {
		stdout, stderr, code := runBinary(t, nil, args...)
		if code != 0 || stderr != "" || !regexp.MustCompile(`^usersd \S+, commit \S+.*, go1\.\S+\n$`).MatchString(stdout) {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	// The tests' binary is a release build (usersdBinary), stamped as the image's is.
	out, err := exec.Command(proctest.Binary(t), "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "usersd "+proctest.Version+", commit ") {
		t.Fatalf("the stamped build says %q (%v)", out, err)
	}
}

// TestBuildInfoMetric: usersd_build_info is 1, labelled with what `usersd version` prints.
func TestBuildInfoMetric(t *testing.T) {
	s := startServerOn(t, t.TempDir()+"/users.db", map[string]string{"USERS_ADMIN_ADDR": "127.0.0.1:0"})
	b := readBuildInfo()
	labels := map[string]string{"version": b.version, "commit": b.commit, "go_version": b.goVersion}
	if b.modified {
		labels["commit"] += "-modified"
	}
	if v, ok := apitest.Sample(adminServer(t, s).Metrics(t), "usersd_build_info", labels); !ok || v != 1 {
		t.Fatalf("usersd_build_info%v = %v (found %v)", labels, v, ok)
	}
}

// TestTheStartUpLogNamesTheBackend: the line that says where the server listens says which kind of
// database it serves from (PostgreSQL's is checked in TestTheDatabasePasswordNeverReachesTheLog).
func TestTheStartUpLogNamesTheBackend(t *testing.T) {
	s := startServer(t)
	if len(s.logs.Entries(map[string]any{"msg": "listening", "backend": "sqlite"})) != 1 {
		t.Fatalf("no listening line naming the backend:\n%s", s.logs)
	}
}
