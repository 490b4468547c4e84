package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// exported mirrors the part of the stdout exporter's JSON the test reads.
type exported struct {
	ScopeMetrics []struct {
		Metrics []struct {
			Name string
			Data struct {
				DataPoints []struct {
					Attributes []struct {
						Key   string
						Value struct{ Value any }
					}
					Value any
					Count uint64
				}
			}
		}
	}
}

// exportedSpan mirrors the part of the stdout trace exporter's JSON the
// tests read.
type exportedSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Links       []struct {
		SpanContext struct{ TraceID, SpanID string }
	}
}

// runMainEnv, set in its environment, makes the test binary run the
// quickstart's main instead of the tests: runQuickstart runs it so, in a
// process of its own, since the stdout trace exporter writes to the
// process's standard output as it was when the package was loaded.
const runMainEnv = "AIONOTEL_QUICKSTART_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// runQuickstart runs the quickstart's main and returns what its stdout
// exporters printed: the spans (one JSON value each, as they are exported)
// and the metrics (one JSON value, when the meter provider shuts down).
func runQuickstart(t *testing.T) (exported, []exportedSpan) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	text, err := cmd.Output()
	if err != nil {
		t.Fatalf("the quickstart: %v\n%s", err, text)
	}
	var metrics exported
	var spans []exportedSpan
	seenMetrics := false
	for dec := json.NewDecoder(bytes.NewReader(text)); ; {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("output JSON: %v\n%s", err, text)
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(raw, &probe); err != nil {
			t.Fatalf("output JSON value: %v\n%s", err, raw)
		}
		switch {
		case probe["ScopeMetrics"] != nil:
			if seenMetrics {
				t.Fatalf("the metrics were printed twice:\n%s", text)
			}
			seenMetrics = true
			if err := json.Unmarshal(raw, &metrics); err != nil {
				t.Fatalf("metrics JSON: %v\n%s", err, raw)
			}
		case probe["SpanContext"] != nil:
			var s exportedSpan
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatalf("span JSON: %v\n%s", err, raw)
			}
			spans = append(spans, s)
		default:
			t.Fatalf("output JSON is neither metrics nor a span:\n%s", raw)
		}
	}
	if !seenMetrics {
		t.Fatalf("no metrics printed:\n%s", text)
	}
	return metrics, spans
}

// TestRun runs the quickstart and reads its output back: one workflow started
// and completed, one activity dispatched and succeeded, none left in flight,
// and four timed appends.
func TestRun(t *testing.T) {
	got, spans := runQuickstart(t)
	checkSpans(t, spans)
	values := map[string]float64{} // "name attr=value,..." -> value or count
	for _, sm := range got.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, p := range m.Data.DataPoints {
				key := m.Name
				for _, a := range p.Attributes {
					key += " " + a.Key + "=" + toString(a.Value.Value)
				}
				if v, ok := p.Value.(float64); ok {
					values[key] = v
				} else {
					values[key] = float64(p.Count)
				}
			}
		}
	}
	want := map[string]float64{
		"aion.workflows.started aion.namespace=default aion.workflow.type=greeting":                                      1,
		"aion.workflows.completed aion.namespace=default aion.workflow.status=completed":                                 1,
		"aion.activities.dispatched aion.activity.type=send_email aion.namespace=default":                                1,
		"aion.activities.completed aion.activity.outcome=succeeded aion.activity.type=send_email aion.namespace=default": 1,
		"aion.inflight_activities aion.activity.type=send_email aion.namespace=default":                                  0,
		"aion.activity.duration aion.activity.outcome=succeeded aion.activity.type=send_email aion.namespace=default":    1,
		"aion.store.operation.duration aion.namespace=default db.operation.name=append db.system.name=aion.eventstore":   4,
	}
	for k, v := range want {
		if g, ok := values[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if t.Failed() {
		t.Logf("exported points: %v", values)
	}
}

// readmePath is the quickstart's README, which lists what it prints.
var readmePath = "README.md"

// frontPage is the repository's README, whose first Go block is this
// program.
var frontPage = filepath.Join("..", "..", "README.md")

// numberWords are the counts the README may spell out.
var numberWords = map[string]int{
	"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
	"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
}

var (
	// readmeCount is the sentence that introduces the README's list of the
	// quickstart's instruments.
	readmeCount = regexp.MustCompile(`It prints one point of each of these (\w+) instruments:`)
	// readmeItem is an item of that list: "- `name`" and what it shows.
	readmeItem = regexp.MustCompile("(?m)^- `([a-z_.]+)`")
)

// readmeInstruments returns the instruments the quickstart README's "What
// it prints" section says the quickstart prints, and the count its prose
// gives.
func readmeInstruments(t *testing.T) (names []string, count int) {
	t.Helper()
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "\n## What it prints\n")
	if start < 0 {
		t.Fatal(`examples/quickstart/README.md has no "## What it prints" section`)
	}
	section := text[start+1:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	m := readmeCount.FindStringSubmatchIndex(section)
	if m == nil {
		t.Fatalf("examples/quickstart/README.md, What it prints: no sentence matching %q", readmeCount)
	}
	word := section[m[2]:m[3]]
	count, ok := numberWords[word]
	if !ok {
		t.Fatalf("examples/quickstart/README.md, What it prints: %q is not a count this test reads", word)
	}
	// The list right after the sentence: its items, up to the first line
	// that is not one.
	for _, line := range strings.Split(strings.TrimLeft(section[m[1]:], "\n"), "\n") {
		item := readmeItem.FindStringSubmatch(line)
		if item == nil {
			if strings.HasPrefix(line, "  ") { // an item's continuation
				continue
			}
			break
		}
		names = append(names, item[1])
	}
	return names, count
}

// TestREADMEInstruments holds the README to what the quickstart prints: its
// list names exactly the instruments the quickstart exports, each once, and
// its count is the list's length. An instrument added to or dropped from
// what the quickstart prints fails here until the README says so.
func TestREADMEInstruments(t *testing.T) {
	listed, count := readmeInstruments(t)
	if count != len(listed) {
		t.Errorf("README.md says %d instruments and lists %d: %v", count, len(listed), listed)
	}
	var printed []string
	points := map[string]int{}
	got, _ := runQuickstart(t)
	for _, sm := range got.ScopeMetrics {
		for _, m := range sm.Metrics {
			printed = append(printed, m.Name)
			points[m.Name] += len(m.Data.DataPoints)
		}
	}
	slices.Sort(printed)
	sortedListed := slices.Sorted(slices.Values(listed))
	if !slices.Equal(printed, sortedListed) {
		t.Errorf("the quickstart prints %v;\nREADME.md lists %v", printed, sortedListed)
	}
	for name, n := range points {
		if n != 1 {
			t.Errorf("%s: %d points, the README says one each", name, n)
		}
	}
}

// TestFrontPageProgramIsTheQuickstart holds the front page's first Go block
// to this program, byte for byte from its package clause: what this
// package's tests show of the quickstart (TestRun, TestREADMEInstruments)
// is shown of the program a reader pastes, and CI builds and runs that
// block in a fresh module through the README's install route
// (.ci/modules.sh).
func TestFrontPageProgramIsTheQuickstart(t *testing.T) {
	raw, err := os.ReadFile(frontPage)
	if err != nil {
		t.Fatal(err)
	}
	block, ok := firstGoBlock(string(raw))
	if !ok {
		t.Fatal("README.md has no ```go block")
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	program := string(src)
	program = program[strings.Index(program, "package main"):]
	if block != program {
		t.Errorf("README.md's first Go block is not examples/quickstart/main.go (from its package clause); the block:\n%s", block)
	}
}

// firstGoBlock returns the body of the first ```go fenced block of a
// Markdown text.
func firstGoBlock(text string) (string, bool) {
	_, rest, ok := strings.Cut(text, "\n```go\n")
	if !ok {
		return "", false
	}
	body, _, ok := strings.Cut(rest, "\n```\n")
	return body + "\n", ok
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// checkSpans holds the printed spans to the front page's claim: a client
// span per append, and the run as one trace rooted at its run span with
// the activity span its child, both linked to appends.
func checkSpans(t *testing.T, spans []exportedSpan) {
	t.Helper()
	byName := map[string][]exportedSpan{}
	appends := map[string]bool{} // span IDs
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
		if s.Name == "append" {
			appends[s.SpanContext.SpanID] = true
		}
	}
	runs, acts := byName["workflow greeting"], byName["activity send_email"]
	if len(byName["append"]) != 4 || len(runs) != 1 || len(acts) != 1 || len(spans) != 6 {
		t.Fatalf("spans by name %v, want 4 append, 1 workflow greeting, 1 activity send_email", byName)
	}
	run, act := runs[0], acts[0]
	if run.Parent.SpanID != "0000000000000000" {
		t.Errorf("run span parent %v, want none (a root)", run.Parent)
	}
	if act.Parent.SpanID != run.SpanContext.SpanID || act.SpanContext.TraceID != run.SpanContext.TraceID {
		t.Errorf("activity span %v parent %v, want the run span %v", act.SpanContext, act.Parent, run.SpanContext)
	}
	for _, s := range []exportedSpan{run, act} {
		if len(s.Links) != 2 {
			t.Errorf("%s: %d links, want 2 (the appends that wrote its first and last event)", s.Name, len(s.Links))
		}
		for _, l := range s.Links {
			if !appends[l.SpanContext.SpanID] {
				t.Errorf("%s: a link to %v, which is no append span", s.Name, l.SpanContext)
			}
		}
	}
}
