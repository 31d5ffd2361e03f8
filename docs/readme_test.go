package docs_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"usersd/internal/proctest"
)

// TestTheREADMERunsInOrder pastes the shell examples of the README and then of the guides in docs/
// (in the order of docsInOrder), in order, into one shell in a fresh copy of the repository, as a
// newcomer reading them one after the other would: every example must work on the state the
// earlier ones left, those of earlier files included. A guide that needs a server of its own
// starts one with a serve block. A block's info string says how it runs:
//
//	```sh                 run; a curl answered 400 or more fails it, as does any failing command
//	```sh serve           start a server: in the background, until the next serve or stop block,
//	                      waited for at localhost:8080/livez
//	```sh stop            stop the server (Ctrl-C in its terminal), then run
//	```sh expect-errors   run, showing error answers: curl may answer 4xx, and a failing command
//	                      does not stop the run
//	```sh norun           shown, not run: the text beside it says why (CI runs it as a step of its
//	                      own, or it needs machines this one does not have)
//
// A file of docs/ with sh blocks must be in docsInOrder or in docsShownOnly, so that no guide's
// examples are skipped because nobody listed it. A failing block is named by its file and line.
// A streaming curl (-N) that reaches its --max-time has done what it shows.
// USERS_README_OUTPUT=FILE keeps what the run printed.
func TestTheREADMERunsInOrder(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "setsid"} {
		if _, err := exec.LookPath(tool); err != nil {
			proctest.MissingTool(t, "USERS_REQUIRE_CURL", "the README's examples need "+tool+", which is not installed")
		}
	}
	// Beside the link checks: it mostly waits for go run and its servers, on ports (8080, 6060)
	// that no other test of any package takes.
	t.Parallel()
	files, err := docsRunOrder("..")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	for _, name := range files {
		text, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		fileBlocks, err := readmeBlocks(name, string(text))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, fileBlocks...)
	}
	dir := freshCopy(t)
	script := readmeScript(blocks)
	os.WriteFile(filepath.Join(dir, ".readme-run.sh"), []byte(script), 0o644)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", ".readme-run.sh")
	cmd.Dir = dir
	cmd.Env = readmeEnv(t)
	out, err := cmd.CombinedOutput()
	if path := os.Getenv("USERS_README_OUTPUT"); path != "" {
		os.WriteFile(path, out, 0o644) // the whole run, to read it through
	}
	if err != nil {
		t.Fatalf("the examples of %s, pasted in order, failed (%v); the output, the failing block (named by its file and line) last:\n%s",
			strings.Join(files, ", "), err, tail(string(out), 80))
	}
	shown := 0
	for _, b := range blocks {
		if b.mode == "norun" {
			shown++
		}
	}
	t.Logf("%d of the %d shell blocks of %s ran in order (USERS_README_OUTPUT=FILE keeps what they printed); %d are shown only",
		len(blocks)-shown, len(blocks), strings.Join(files, ", "), shown)
	if left := leftInTheCheckout(t, dir); len(left) > 0 {
		t.Errorf("the examples left files in the checkout that git does not ignore (a release build would say \"modified\", and an image could carry them); write them to a temporary folder:\n%s",
			strings.Join(left, "\n"))
	}
}

// leftInTheCheckout returns the files in the copy dir that are neither tracked nor ignored by the
// repository's .gitignore: what the examples would leave in a reader's checkout.
func leftInTheCheckout(t *testing.T, dir string) []string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tracked := map[string]bool{".readme-run.sh": true}
	for _, name := range trackedFiles(t, root) {
		tracked[name] = true
	}
	var added []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		serverLog, _ := filepath.Match(".server-*.log", rel) // the run's own, as the terminal a reader starts a server in
		if !tracked[rel] && !serverLog {
			added = append(added, rel)
		}
		return nil
	})
	if len(added) == 0 {
		return nil
	}
	check := exec.Command("git", "-C", root, "check-ignore", "--no-index", "--stdin")
	check.Stdin = strings.NewReader(strings.Join(added, "\n") + "\n")
	out, _ := check.Output() // exit 1 when none is ignored
	ignored := map[string]bool{}
	for name := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		ignored[name] = true
	}
	var left []string
	for _, name := range added {
		if !ignored[name] {
			left = append(left, name)
		}
	}
	return left
}

// trackedFiles lists the files git tracks in root, relative to it.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	files, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		proctest.MissingTool(t, "USERS_REQUIRE_GIT", fmt.Sprintf("not a git checkout, or no git (%v): the README's run copies the tracked files", err))
	}
	return strings.Split(strings.TrimSuffix(string(files), "\x00"), "\x00")
}

// docsInOrder is the order in which the guides' examples run, after the README's: each works on
// the state the ones before it left (the README's service, its users, the keys file of
// ACCESS.md, the backup of BACKUPS.md). It is the order of the README's list of guides. A guide
// with no sh blocks may be listed or not.
var docsInOrder = []string{
	"docs/API.md",
	"docs/SCIM.md",
	"docs/ACCESS.md",
	"docs/WEBHOOKS.md",
	"docs/OBSERVABILITY.md",
	"docs/BACKUPS.md",
	"docs/DEPLOYMENT.md",
	"docs/POSTGRESQL.md",
	"docs/LIMITS.md",
	"docs/TESTING.md",
	"docs/DEVELOPMENT.md",
}

// docsShownOnly are the files of docs/ whose sh blocks are never run here, and why.
var docsShownOnly = map[string]string{
	"docs/PERFORMANCE.md":     "benchmarks: minutes of load on a quiet machine, run by hand (bench/run), never in CI",
	"docs/PERFORMANCE-LOG.md": "the commands of past measurements, kept as they were run",
}

// docsRunOrder returns the files whose examples run, README.md first, relative to root. A listed
// guide that is missing, or a file of docs/ with sh blocks that is in neither docsInOrder nor
// docsShownOnly, is an error.
func docsRunOrder(root string) ([]string, error) {
	listed := map[string]bool{}
	for _, name := range docsInOrder {
		if _, ok := docsShownOnly[name]; ok || listed[name] {
			return nil, fmt.Errorf("%s is listed twice among the docs the README's run reads", name)
		}
		listed[name] = true
		if _, err := os.Stat(filepath.Join(root, name)); err != nil {
			return nil, fmt.Errorf("docsInOrder lists %s: %w", name, err)
		}
	}
	for name := range docsShownOnly {
		listed[name] = true
	}
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, path := range guides {
		name := "docs/" + filepath.Base(path)
		if listed[name] {
			continue
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		blocks, err := readmeBlocks(name, string(text))
		if err != nil {
			return nil, err
		}
		if len(blocks) > 0 {
			return nil, fmt.Errorf("%s has %d sh blocks (the first on line %d) but is not in docsInOrder (docs/readme_test.go): "+
				"add it where its examples can run, after the guides whose state they need", name, len(blocks), blocks[0].line)
		}
	}
	return append([]string{"README.md"}, docsInOrder...), nil
}

// readmeBlock is a fenced ```sh block of the README or of a guide.
type readmeBlock struct {
	file string // relative to the repository: README.md, or a guide in docs/
	line int    // of its opening fence
	mode string // "", "serve", "stop", "expect-errors" or "norun"
	text string
}

// readmeBlocks returns the sh blocks of file (named name), in order; an unknown mode is an error,
// so that a typo cannot quietly turn an example off.
func readmeBlocks(name, readme string) ([]readmeBlock, error) {
	var blocks []readmeBlock
	var open *readmeBlock
	var inOther bool
	scanner := bufio.NewScanner(strings.NewReader(readme))
	for n := 1; scanner.Scan(); n++ {
		line := scanner.Text()
		switch {
		case open != nil && line == "```":
			blocks = append(blocks, *open)
			open = nil
		case open != nil:
			open.text += line + "\n"
		case inOther && strings.HasPrefix(line, "```"):
			inOther = false
		case inOther:
		case strings.HasPrefix(line, "```sh"):
			fields := strings.Fields(strings.TrimPrefix(line, "```"))
			b := &readmeBlock{file: name, line: n}
			if len(fields) > 1 {
				b.mode = fields[1]
			}
			switch b.mode {
			case "", "serve", "stop", "expect-errors", "norun":
			default:
				return nil, fmt.Errorf("%s line %d: unknown mode %q for a sh block", name, n, b.mode)
			}
			open = b
		case strings.HasPrefix(line, "```"):
			inOther = true
		}
	}
	return blocks, nil
}

// readmeScript is the whole run as one bash script, so that what a block sets (a variable, an
// alias) holds in the next, as in a terminal.
func readmeScript(blocks []readmeBlock) string {
	var b strings.Builder
	b.WriteString(`shopt -s expand_aliases
server=
stop_server() {
  if [ -n "$server" ]; then
    kill -TERM -- "-$server" 2>/dev/null; wait "$server" 2>/dev/null
    # go run can end before the server it started has closed its database (and removed SQLite's
    # -wal and -shm files): wait for every process of the server's session, as a terminal's
    # prompt comes back only when the server is gone.
    for _ in $(seq 300); do kill -0 -- "-$server" 2>/dev/null || break; sleep 0.1; done
    server=
    for _ in $(seq 100); do curl_plain -s -o /dev/null localhost:8080/livez || break; sleep 0.1; done
  fi
}
trap stop_server EXIT
curl_plain() { command curl "$@"; }
# curl as the examples use it: an answer of 400 or more fails the example, unless errors are
# expected; a stream (-N) that ran until its --max-time did what it shows.
curl() {
  local stream=
  for a in "$@"; do [ "$a" = -N ] && stream=1; done
  local rc=0
  if [ -n "$expect_errors" ]; then command curl --silent --show-error "$@" || rc=$?; else command curl --silent --show-error --fail-with-body "$@" || rc=$?; fi
  echo
  if [ -n "$stream" ] && [ "$rc" = 28 ]; then rc=0; fi
  return "$rc"
}
`)
	for i, block := range blocks {
		fmt.Fprintf(&b, "\necho; echo '== block %d (%s line %d%s)'\n", i+1, block.file, block.line, map[string]string{"": "", "serve": ", serve", "stop": ", after stopping the server", "expect-errors": ", errors expected", "norun": ", not run"}[block.mode])
		switch block.mode {
		case "norun":
			continue
		case "serve":
			// The block's last command serves; it runs in a session of its own, so that stopping it
			// stops what it started (go run's child too).
			fmt.Fprintf(&b, "stop_server\nsetsid bash -c %s > .server-%d.log 2>&1 &\nserver=$!\n", shellQuote("shopt -s expand_aliases\n"+block.text), i+1)
			fmt.Fprintf(&b, `for _ in $(seq 1800); do
  curl_plain -s -o /dev/null localhost:8080/livez && break
  kill -0 "$server" 2>/dev/null || { echo "the server of block %d (%s line %d) stopped:"; cat .server-%d.log; exit 1; }
  sleep 0.1
done
curl_plain -s -o /dev/null localhost:8080/livez || { echo "the server of block %d (%s line %d) did not listen within 3 minutes:"; cat .server-%d.log; exit 1; }
`, i+1, block.file, block.line, i+1, i+1, block.file, block.line, i+1)
		case "stop":
			fmt.Fprintf(&b, "stop_server\nset -e -o pipefail\n%sset +e +o pipefail\n", block.text)
		case "expect-errors":
			fmt.Fprintf(&b, "expect_errors=1\n%sexpect_errors=\n", block.text)
		default:
			fmt.Fprintf(&b, "set -e -o pipefail\n%sset +e +o pipefail\n", block.text)
		}
	}
	b.WriteString("\necho; echo '== done'\n")
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// freshCopy copies the repository's tracked files, as a fresh clone has them, to a folder of the
// test's own.
func freshCopy(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range trackedFiles(t, root) {
		src, dst := filepath.Join(root, name), filepath.Join(dir, name)
		info, err := os.Lstat(src)
		if err != nil {
			continue // deleted in the working tree, not yet in the index
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(src, dst, info.Mode()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// readmeEnv is a newcomer's environment: the PATH and Go's caches (so that nothing is downloaded
// again), and none of the service's settings.
func readmeEnv(t *testing.T) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	for _, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN"} {
		out, err := exec.Command("go", "env", name).Output()
		if err == nil && strings.TrimSpace(string(out)) != "" {
			env = append(env, name+"="+strings.TrimSpace(string(out)))
		}
	}
	return env
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
