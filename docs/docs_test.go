// Package docs_test checks the documentation against the code and itself:
// every flag the server defines has a row in configuration.md, and every
// relative link and #anchor in the Markdown pages resolves, so moving a
// section or adding a flag cannot leave the docs behind unnoticed; and the
// repository carries no binaries.
package docs_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, relative to this package's folder.
const root = ".."

// TestConfiguration_EveryFlag: every flag cmd/throttled defines appears as
// "`--name`" in docs/configuration.md.
func TestConfiguration_EveryFlag(t *testing.T) {
	flags := serverFlags(t, filepath.Join(root, "cmd", "throttled"))
	if len(flags) < 30 {
		t.Fatalf("found only %d flags in cmd/throttled (%v): is the parser missing some calls?", len(flags), flags)
	}
	page := readFile(t, filepath.Join(root, "docs", "configuration.md"))
	for _, name := range flags {
		if !strings.Contains(page, "`--"+name+"`") {
			t.Errorf("flag --%s has no row in docs/configuration.md (want \"`--%s`\")", name, name)
		}
	}
}

// flagDefiners are the flag.FlagSet methods that define a flag; their name
// is the first argument, or the second for the ...Var forms.
var flagDefiners = map[string]int{
	"Bool": 0, "Int": 0, "Int64": 0, "Uint": 0, "Uint64": 0, "String": 0,
	"Float64": 0, "Duration": 0, "Func": 0, "BoolFunc": 0,
	"BoolVar": 1, "IntVar": 1, "Int64Var": 1, "UintVar": 1, "Uint64Var": 1,
	"StringVar": 1, "Float64Var": 1, "DurationVar": 1, "Var": 1, "TextVar": 1,
}

// serverFlags parses the non-test Go files of dir and returns the names of
// the flags they define: the string-literal name argument of every
// flag-defining method call (fs.StringVar(&x, "name", ...)).
func serverFlags(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			at, ok := flagDefiners[sel.Sel.Name]
			if !ok || len(call.Args) <= at {
				return true
			}
			lit, ok := call.Args[at].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			name, err := strconv.Unquote(lit.Value)
			if err == nil && name != "" {
				seen[name] = true
			}
			return true
		})
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// TestLinks_Resolve: every relative link in README.md, docs/*.md,
// bench/README.md and examples/**/*.md names a file that exists, and every
// #anchor names a heading of the page it points at.
func TestLinks_Resolve(t *testing.T) {
	for _, page := range markdownPages(t) {
		for _, problem := range brokenLinks(t, page) {
			t.Errorf("%s", problem)
		}
	}
}

// markdownPages lists the pages whose links are checked, relative to root:
// the README, the changelog, docs/, bench/README.md, the compat notes and
// every Markdown file under examples/.
func markdownPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md", "CHANGELOG.md", filepath.Join("bench", "README.md")}
	for _, folder := range []string{"docs", "compat"} {
		found, err := filepath.Glob(filepath.Join(root, folder, "*.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range found {
			pages = append(pages, filepath.Join(folder, filepath.Base(p)))
		}
	}
	var err error
	err = filepath.WalkDir(filepath.Join(root, "examples"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			pages = append(pages, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// linkRE finds inline Markdown links and images: [text](target) with an
// optional "title". Targets with a scheme (https:, mailto:) are not ours.
var linkRE = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)

// brokenLinks returns one line per link of page (relative to root) that
// does not resolve.
func brokenLinks(t *testing.T, page string) []string {
	t.Helper()
	var problems []string
	for lineNo, line := range proseLines(readFile(t, filepath.Join(root, page))) {
		if line == "" {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, ":") || strings.HasPrefix(target, "//") {
				continue // https:, mailto:: outside the repository
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s does not exist", page, lineNo+1, target, dest))
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: an anchor into a file that is not Markdown", page, lineNo+1, target))
				continue
			}
			if !headingAnchors(t, dest)[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s has no heading with anchor #%s", page, lineNo+1, target, dest, anchor))
			}
		}
	}
	return problems
}

// proseLines returns the lines of a Markdown text with those inside fenced
// code blocks blanked, keeping the line numbers.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	inFence := false
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			lines[i] = ""
			continue
		}
		if inFence {
			lines[i] = ""
		}
	}
	return lines
}

var headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// headingAnchors returns the anchors GitHub gives the headings of page
// (relative to root).
func headingAnchors(t *testing.T, page string) map[string]bool {
	t.Helper()
	anchors := map[string]bool{}
	count := map[string]int{}
	for _, line := range proseLines(readFile(t, filepath.Join(root, page))) {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slug(m[1])
		if n := count[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		count[slug]++
	}
	return anchors
}

// slug is GitHub's anchor for a heading's text: lower case, Markdown
// emphasis and code marks dropped with every other punctuation mark but '-'
// and '_', each space a '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSlug pins the slug rules on headings these pages use.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"CL.THROTTLE: a drop-in for redis-cell":     "clthrottle-a-drop-in-for-redis-cell",
		"Replication: an active-active (CRDT) mesh": "replication-an-active-active-crdt-mesh",
		"Use it with...":                       "use-it-with",
		"Several limits at once: THROTTLE.ALL": "several-limits-at-once-throttleall",
		"snake_case and `code`":                "snake_case-and-code",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
