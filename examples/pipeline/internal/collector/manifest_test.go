package collector_test

import (
	"bytes"
	"flag"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/confmap"
	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/modfile"

	"github.com/aionotel/aionotel/examples/pipeline/internal/collector"
)

var regenerate = flag.Bool("regenerate", false, "rewrite components.go from builder-config.yaml with ocb")

// moduleDir is examples/pipeline, where builder-config.yaml lives.
var moduleDir = filepath.Join("..", "..")

type module struct {
	GoMod  string `yaml:"gomod"`
	Import string `yaml:"import"`
}

type manifest struct {
	Dist struct {
		Name    string `yaml:"name"`
		Version string `yaml:"version"`
	} `yaml:"dist"`
	Receivers    []module `yaml:"receivers"`
	Processors   []module `yaml:"processors"`
	Exporters    []module `yaml:"exporters"`
	Extensions   []module `yaml:"extensions"`
	Connectors   []module `yaml:"connectors"`
	Telemetry    module   `yaml:"telemetry"`
	Providers    []module `yaml:"providers"`
	ConfResolver struct {
		DefaultURIScheme string `yaml:"default_uri_scheme"`
	} `yaml:"conf_resolver"`
}

func readManifest(t *testing.T) (manifest, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(moduleDir, "builder-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("builder-config.yaml: %v", err)
	}
	return m, raw
}

var outputPath = regexp.MustCompile(`(?m)^(\s*output_path:).*$`)

// TestComponentsMatchManifest runs ocb on builder-config.yaml (sources only)
// and compares the components.go it generates with this package's: one
// component set for the in-process tests and the built Collector.
func TestComponentsMatchManifest(t *testing.T) {
	_, raw := readManifest(t)
	out := t.TempDir()
	if !outputPath.Match(raw) {
		t.Fatal("builder-config.yaml has no dist.output_path")
	}
	path := filepath.Join(out, "manifest.yaml")
	if err := os.WriteFile(path, outputPath.ReplaceAll(raw, []byte("${1} "+filepath.Join(out, "dist"))), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "builder", "--config", path, "--skip-compilation", "--skip-get-modules")
	cmd.Dir = moduleDir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go tool builder: %v\n%s", err, b)
	}
	gen, err := os.ReadFile(filepath.Join(out, "dist", "components.go"))
	if err != nil {
		t.Fatal(err)
	}
	gen = bytes.Replace(gen, []byte("\npackage main\n"), []byte("\npackage collector\n"), 1)
	if gen, err = format.Source(gen); err != nil {
		t.Fatalf("gofmt of the generated components.go: %v", err)
	}
	if *regenerate {
		if err := os.WriteFile("components.go", gen, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile("components.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, gen) {
		t.Errorf("components.go is not what ocb generates from builder-config.yaml; run\n\tgo test ./internal/collector -run %s -args -regenerate\nocb generates:\n%s", t.Name(), gen)
	}
}

// TestManifestVersions checks that every module of builder-config.yaml is
// linked into these tests at the manifest's version, and that the
// distribution's name, version and configuration providers are those of
// [collector.Settings].
func TestManifestVersions(t *testing.T) {
	m, _ := readManifest(t)
	gomod, err := os.ReadFile(filepath.Join(moduleDir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", gomod, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The go.mod of a go >= 1.17 module lists every module of its build
	// list, at the selected version.
	linked := map[string]string{}
	for _, r := range mf.Require {
		linked[r.Mod.Path] = r.Mod.Version
	}
	var all []module
	for _, list := range [][]module{m.Receivers, m.Processors, m.Exporters, m.Extensions, m.Connectors, m.Providers, {m.Telemetry}} {
		all = append(all, list...)
	}
	for _, mod := range all {
		path, version, ok := strings.Cut(mod.GoMod, " ")
		if !ok {
			t.Errorf("gomod %q: want \"<module> <version>\"", mod.GoMod)
			continue
		}
		switch got, found := linked[path]; {
		case !found:
			t.Errorf("%s is in builder-config.yaml but not in go.mod (go get it at that version)", path)
		case got != version:
			t.Errorf("%s: builder-config.yaml says %s, this module builds with %s", path, version, got)
		}
	}

	set := collector.Settings()
	if m.Dist.Name != collector.Command || m.Dist.Version != collector.Version ||
		m.Dist.Name != set.BuildInfo.Command || m.Dist.Version != set.BuildInfo.Version {
		t.Errorf("dist %s %s, Settings %s %s", m.Dist.Name, m.Dist.Version, set.BuildInfo.Command, set.BuildInfo.Version)
	}
	var want, got []string
	for _, p := range m.Providers {
		path, _, _ := strings.Cut(p.GoMod, " ")
		want = append(want, strings.TrimSuffix(path[strings.LastIndexByte(path, '/')+1:], "provider"))
	}
	for _, f := range set.ConfigProviderSettings.ResolverSettings.ProviderFactories {
		got = append(got, f.Create(confmap.ProviderSettings{}).Scheme())
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("provider schemes: Settings %v, builder-config.yaml %v", got, want)
	}
	if d := set.ConfigProviderSettings.ResolverSettings.DefaultScheme; d != m.ConfResolver.DefaultURIScheme {
		t.Errorf("default scheme: Settings %q, builder-config.yaml %q", d, m.ConfResolver.DefaultURIScheme)
	}
}
