package catalog

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// instrumentName is the shape of an instrument name of the catalog.
var instrumentName = regexp.MustCompile(`^(aion|gen_ai)\.[a-z0-9_.]+$`)

// instruments returns the instrument names this package declares: its
// untyped string constants of that shape, but the defaults
// (Default*) and the names of events (Event*, *Event), which share it.
func instruments(t *testing.T) []string {
	t.Helper()
	return instrumentsIn(t, "*.go")
}

// sources parses the non-test Go files matching pattern.
func sources(t *testing.T, pattern string) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	var out []*ast.File
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// instrumentsIn is instruments of the files matching pattern.
func instrumentsIn(t *testing.T, pattern string) []string {
	t.Helper()
	var names []string
	for _, f := range sources(t, pattern) {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Type != nil {
					continue // attribute.Key and the like
				}
				for i, id := range vs.Names {
					if i >= len(vs.Values) || strings.HasPrefix(id.Name, "Default") ||
						strings.HasPrefix(id.Name, "Event") || strings.HasSuffix(id.Name, "Event") {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					if v, err := strconv.Unquote(lit.Value); err == nil && instrumentName.MatchString(v) {
						names = append(names, v)
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// TestCatalogFindsTheInstruments keeps the extraction honest: a few names
// every run records are among those found, and no event name is.
func TestCatalogFindsTheInstruments(t *testing.T) {
	names := instruments(t)
	for _, want := range []string{StoreOperationDuration, InflightActivities, WorkflowDuration, ActivityWaitDuration, GenAIClientTokenUsage, GenAIToolCalls} {
		if !slices.Contains(names, want) {
			t.Errorf("%s not found among %v", want, names)
		}
	}
	for _, not := range []string{RetryEvent, ClaimEvent, EventUsage, DefaultStoreSystem} {
		if slices.Contains(names, not) {
			t.Errorf("%s found among the instruments", not)
		}
	}
}

// engineInstruments are the instruments of engine modules (engines.go):
// each with its module's directory, relative to this one, where its
// package doc must name it and a Go file must declare the same name.
var engineInstruments = map[string]string{
	WorkflowTaskWaitDuration: filepath.Join("..", "..", "instrumentation", "github.com", "cschleiden", "go-workflows", "otelworkflows"),
}

// withoutEngines returns names without the engine modules' instruments.
func withoutEngines(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { _, ok := engineInstruments[n]; return ok })
}

// TestFrontPageTableNamesEveryInstrument holds the front page's table of
// families (README.md, "What you get": the second column of each row) to
// this catalog: every instrument is in it, and it names nothing else. An
// engine module's own instrument may be in it; its module's doc must name
// it (TestEngineInstruments).
func TestFrontPageTableNamesEveryInstrument(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## What you get\n")
	if !ok {
		t.Fatal(`README.md has no "## What you get" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	code := regexp.MustCompile("`([^`]+)`")
	var listed []string
	for _, line := range strings.Split(section, "\n") {
		cols := strings.Split(line, "|")
		if len(cols) < 4 || !strings.HasPrefix(line, "|") {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cols[2], -1) {
			if instrumentName.MatchString(m[1]) {
				listed = append(listed, m[1])
			}
		}
	}
	compare(t, "README.md's table of families", withoutEngines(listed), withoutEngines(instruments(t)))
}

// TestPackageDocListsTheStoreInstruments holds otelstore's package doc
// ("Telemetry catalog") to the catalog: it lists every instrument but the
// GenAI ones (listed on NewKeyspace) and the engine modules' (which
// otelstore never records), each once.
func TestPackageDocListsTheStoreInstruments(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "otelstore", "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "//\t")); strings.HasPrefix(line, "//\taion.") && len(f) > 0 {
			listed = append(listed, f[0])
		}
	}
	var want []string
	for _, name := range withoutEngines(instruments(t)) {
		if !strings.Contains(name, "gen_ai") {
			want = append(want, name)
		}
	}
	compare(t, "otelstore's package doc", listed, want)
}

func compare(t *testing.T, where string, listed, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, name := range listed {
		seen[name]++
	}
	for _, name := range want {
		if seen[name] == 0 {
			t.Errorf("%s lacks %s", where, name)
		}
	}
	for name, n := range seen {
		if !slices.Contains(want, name) {
			t.Errorf("%s names %s, which is not an instrument of the catalog", where, name)
		}
		if n > 1 {
			t.Errorf("%s names %s %d times", where, name, n)
		}
	}
}

// frontPageLimit is the front page's size bound: read in two minutes, the
// reference in the package docs and the examples' own pages.
const frontPageLimit = 10_000

func TestFrontPageIsShort(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) >= frontPageLimit {
		t.Errorf("README.md is %d bytes, want under %d: move reference to the package docs or an example's README", len(raw), frontPageLimit)
	}
}

// TestEngineInstruments holds each engine module's instrument to the
// catalog: the module declares the same name as a string constant in one
// of its Go files (its own copy: a module never imports another's internal
// packages) and its package doc names it; and the engine modules'
// instruments are exactly those engines.go declares.
func TestEngineInstruments(t *testing.T) {
	for name, dir := range engineInstruments {
		t.Run(name, func(t *testing.T) {
			doc, err := os.ReadFile(filepath.Join(dir, "doc.go"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), name) {
				t.Errorf("%s/doc.go does not name %s", dir, name)
			}
			declared := false
			for _, f := range sources(t, filepath.Join(dir, "*.go")) {
				ast.Inspect(f, func(n ast.Node) bool {
					vs, ok := n.(*ast.ValueSpec)
					if !ok {
						return true
					}
					for _, v := range vs.Values {
						if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING && lit.Value == strconv.Quote(name) {
							declared = true
						}
					}
					return true
				})
			}
			if !declared {
				t.Errorf("no constant of %s declares %q", dir, name)
			}
		})
	}
	var listed []string
	for name := range engineInstruments {
		listed = append(listed, name)
	}
	compare(t, "engineInstruments", listed, instrumentsIn(t, "engines.go"))
}
