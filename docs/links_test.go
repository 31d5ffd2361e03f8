package docs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"usersd/internal/proctest"
)

// docsLinked are the markdown files whose relative links TestDocsLinksResolve follows: the README,
// the guides and the other pages of the repository that readers reach from them.
var docsLinked = []string{"*.md", "docs/*.md", "bench/*.md"}

// TestDocsLinksResolve checks every relative link of the README and of the guides in docs/: the
// file it names exists inside the repository, and the heading (or <a id>) its #fragment names is
// one that file has. Guides move and headings get renamed; a link that stopped resolving fails
// here rather than in a reader's browser.
func TestDocsLinksResolve(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, pattern := range docsLinked {
		matches, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, matches...)
	}
	anchors := map[string]map[string]bool{} // of each markdown file read, by its absolute path
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		anchors[path] = markdownAnchors(string(text))
		return anchors[path], nil
	}
	links := 0
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, file)
		for _, link := range markdownLinks(string(text)) {
			if strings.Contains(link.target, "://") || strings.HasPrefix(link.target, "mailto:") {
				continue // another site's: not checked here
			}
			links++
			path, fragment, _ := strings.Cut(link.target, "#")
			target := file
			if path != "" {
				target = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
			}
			if rel, err := filepath.Rel(root, target); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				t.Errorf("%s line %d: %s leads out of the repository", name, link.line, link.target)
				continue
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s line %d: %s: no such file", name, link.line, link.target)
				continue
			}
			if fragment == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			a, err := anchorsOf(target)
			if err != nil {
				t.Fatal(err)
			}
			if !a[fragment] {
				t.Errorf("%s line %d: %s: the file has no heading or anchor %q", name, link.line, link.target, fragment)
			}
		}
	}
	if links == 0 {
		t.Fatal("found no relative links at all: the parser is broken, or the files moved")
	}
	t.Logf("%d relative links in %d files checked", links, len(files))
}

type markdownLink struct {
	line   int
	target string
}

var (
	inlineCode = regexp.MustCompile("`[^`]*`")
	linkTarget = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	anchorTag  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	linkInText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// markdownLinks returns the targets of the inline links and images of text, outside fenced code
// blocks and code spans, each with the line it ends on.
func markdownLinks(text string) []markdownLink {
	var links []markdownLink
	prose := markdownProse(text)
	for _, m := range linkTarget.FindAllStringSubmatchIndex(prose, -1) {
		links = append(links, markdownLink{
			line:   strings.Count(prose[:m[0]], "\n") + 1,
			target: prose[m[2]:m[3]],
		})
	}
	return links
}

// markdownProse is text with its fenced code blocks and code spans blanked out, keeping the line
// breaks so that line numbers stay true.
func markdownProse(text string) string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
				fence = ""
			}
			lines[i] = ""
		case strings.HasPrefix(trimmed, "```"), strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
			lines[i] = ""
		}
	}
	return inlineCode.ReplaceAllStringFunc(strings.Join(lines, "\n"), func(code string) string {
		return strings.Repeat("\n", strings.Count(code, "\n"))
	})
}

// markdownAnchors returns the fragments that lead somewhere in text: the ids GitHub gives its
// headings, and the explicit <a id> and <a name> anchors.
func markdownAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for line := range strings.SplitSeq(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		case strings.HasPrefix(trimmed, "```"), strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
			continue
		}
		for _, m := range anchorTag.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		if heading, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") && len(line)-len(strings.TrimLeft(line, "#")) <= 6 {
			slug := headingSlug(heading)
			if n := seen[slug]; n > 0 {
				anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				anchors[slug] = true
			}
			seen[slug]++
		}
	}
	return anchors
}

// headingSlug is the id GitHub gives a heading: its text (a link's text, not its target) in lower
// case, without punctuation but hyphens and underscores, spaces turned into hyphens.
func headingSlug(heading string) string {
	heading = linkInText.ReplaceAllString(strings.TrimSpace(heading), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-', r == '_', unicode.IsLetter(r), unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// docsCitation is a guide, and maybe one of its headings, as code, SQL, the proto and the OpenAPI
// document cite it: docs/API.md#lists-at-scale.
var docsCitation = regexp.MustCompile(`docs/([A-Z][A-Z-]*\.md)(#[a-z0-9_-]+)?`)

// TestCitedGuidesResolve checks every guide that the repository's own files cite by path, in
// comments and messages: the guide exists, and so does the heading its #fragment names. A comment
// says why by pointing at a rule; the rule must still be where it points.
func TestCitedGuidesResolve(t *testing.T) {
	out, err := exec.Command("git", "-C", "..", "ls-files", "*.go", "*.sql", "*.proto", "*.ts", "*.json", "Dockerfile", ".ci/*").Output()
	if err != nil {
		proctest.MissingTool(t, "USERS_REQUIRE_GIT", fmt.Sprintf("git ls-files: %v (the test lists the tracked files with git)", err))
	}
	cited := 0
	for _, name := range strings.Fields(string(out)) {
		if strings.HasPrefix(name, "web/public/") || strings.HasSuffix(name, "package-lock.json") {
			continue // built or locked, not written
		}
		text, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docsCitation.FindAllStringSubmatchIndex(string(text), -1) {
			cited++
			line := strings.Count(string(text[:m[0]]), "\n") + 1
			guide := string(text[m[2]:m[3]]) // the test runs in docs/
			body, err := os.ReadFile(guide)
			if err != nil {
				t.Errorf("%s line %d cites %s, which does not exist", name, line, text[m[0]:m[1]])
				continue
			}
			if m[4] >= 0 && !markdownAnchors(string(body))[string(text[m[4]+1:m[5]])] {
				t.Errorf("%s line %d cites %s: the guide has no such heading", name, line, text[m[0]:m[1]])
			}
		}
	}
	if cited == 0 {
		t.Fatal("no file cites a guide: the pattern is broken, or the files moved")
	}
	t.Logf("%d citations of guides checked", cited)
}
