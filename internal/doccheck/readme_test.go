package doccheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// root is the module's root, from this package's directory.
var root = filepath.Join("..", "..")

// maxREADME is the most characters README.md may hold: an introduction
// read in ten minutes; the reference lives in docs/.
const maxREADME = 12000

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestREADMESize(t *testing.T) {
	if n := utf8.RuneCountInString(readFile(t, "README.md")); n > maxREADME {
		t.Errorf("README.md holds %d characters, at most %d: move reference material to docs/", n, maxREADME)
	}
}

// The README's Go program is api's Example as a main package: its
// imports, its body as main's, and its Output as the block after it.
func TestREADMECopiesExample(t *testing.T) {
	const exampleFile = "api/example_readme_test.go"
	src := readFile(t, exampleFile)
	imports := between(t, src, "import (", ")\n")
	body := between(t, src, "func Example() {\n", "\t// Output:\n")
	output := between(t, src, "\t// Output:\n", "\n}\n")

	var prog strings.Builder
	prog.WriteString("package main\n\nimport (" + imports + ")\n\nfunc main() {\n")
	for _, l := range strings.SplitAfter(strings.TrimRight(body, "\n"), "\n") {
		l = strings.TrimPrefix(l, "\t")
		if strings.TrimSpace(l) != "" {
			l = "\t" + l
		}
		prog.WriteString(l)
	}
	prog.WriteString("\n}\n")
	var out strings.Builder
	for _, l := range strings.Split(strings.TrimRight(output, "\n"), "\n") {
		out.WriteString(strings.TrimPrefix(l, "\t// ") + "\n")
	}

	readme := readFile(t, "README.md")
	if !strings.Contains(readme, "```go\n"+prog.String()+"```\n") {
		t.Errorf("README.md's Go program is not %s's Example as a main package; copy it again:\n```go\n%s```", exampleFile, prog.String())
	}
	if !strings.Contains(readme, "```\n"+out.String()+"```\n") {
		t.Errorf("README.md does not show the Example's output as a block:\n```\n%s```", out.String())
	}
}

// between returns the text of s after the first start and before the
// next end.
func between(t *testing.T, s, start, end string) string {
	t.Helper()
	i := strings.Index(s, start)
	if i < 0 {
		t.Fatalf("no %q", start)
	}
	s = s[i+len(start):]
	j := strings.Index(s, end)
	if j < 0 {
		t.Fatalf("no %q after %q", end, start)
	}
	return s[:j]
}
