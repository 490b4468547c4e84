package main

import (
	"encoding/json"
	"io"
	"os"
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

// runQuickstart runs the quickstart's main and returns what its stdout
// exporter printed.
func runQuickstart(t *testing.T) exported {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w // the exporter writes to os.Stdout as it is when made
	printed := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		printed <- b
	}()
	func() {
		defer func() { os.Stdout = stdout; w.Close() }()
		main()
	}()
	text := string(<-printed)
	var got exported
	if err := json.Unmarshal([]byte(text[max(0, strings.IndexByte(text, '{')):]), &got); err != nil {
		t.Fatalf("metrics JSON: %v\n%s", err, text)
	}
	return got
}

// TestRun runs the quickstart and reads its output back: one workflow started
// and completed, one activity dispatched and succeeded, none left in flight,
// and four timed appends.
func TestRun(t *testing.T) {
	got := runQuickstart(t)
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
	for _, sm := range runQuickstart(t).ScopeMetrics {
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
