package main

import (
	"bytes"
	"encoding/json"
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

// runQuickstart runs the quickstart and returns what its stdout exporter
// printed.
func runQuickstart(t *testing.T) exported {
	t.Helper()
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !strings.HasPrefix(text, "recorded 4 events of workflow ") {
		t.Fatalf("output starts %q", text[:min(len(text), 60)])
	}
	var got exported
	if err := json.Unmarshal([]byte(text[strings.IndexByte(text, '{'):]), &got); err != nil {
		t.Fatalf("metrics JSON: %v", err)
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

// readmePath is the repository's README, from this directory.
var readmePath = filepath.Join("..", "..", "README.md")

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

// readmeInstruments returns the instruments the README's "The smallest
// program" section says the quickstart prints, and the count its prose
// gives.
func readmeInstruments(t *testing.T) (names []string, count int) {
	t.Helper()
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "\n## The smallest program\n")
	if start < 0 {
		t.Fatal(`README.md has no "## The smallest program" section`)
	}
	section := text[start+1:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	m := readmeCount.FindStringSubmatchIndex(section)
	if m == nil {
		t.Fatalf("README.md, The smallest program: no sentence matching %q", readmeCount)
	}
	word := section[m[2]:m[3]]
	count, ok := numberWords[word]
	if !ok {
		t.Fatalf("README.md, The smallest program: %q is not a count this test reads", word)
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

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
