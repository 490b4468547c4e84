// Package attrvalue makes strings that callers or stores control safe to use
// as attribute values.
//
// The OTLP protobuf encoding refuses a string field that is not valid UTF-8,
// and the Prometheus exporter fails the whole scrape on one: a single hostile
// workflow type admitted into a metric stream would stop every later export
// of the process, because the cumulative state keeps the stream. So every
// such value is passed through [String] before it reaches an instrument or a
// span: invalid bytes become U+FFFD and the value is cut to at most [MaxLen]
// bytes, on a rune boundary. The cardinality guard runs after it, on the
// cleaned value.
//
// [Int64] does the same for unsigned numbers (sequence numbers, token
// counts, IDs): an attribute holds int64 at most.
//
// The functions are pure and safe for concurrent use; a value that is
// already clean is returned as it is, without allocating.
package attrvalue

import (
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
)

// MaxLen is the largest length, in bytes, of a cleaned value.
const MaxLen = 256

// MaxTextLen is the largest length, in bytes, of span text that a store
// controls (an error message): longer than an attribute value, since it is
// read by people, and bounded all the same.
const MaxTextLen = 1024

// String returns s with every invalid UTF-8 sequence replaced by U+FFFD,
// cut to at most MaxLen bytes without splitting a rune.
func String(s string) string { return Cut(s, MaxLen) }

// Cut returns s with every invalid UTF-8 sequence replaced by U+FFFD, cut to
// at most n bytes (n < 0: 0) without splitting a rune. It is String with
// another bound, for text that is not an attribute value of a metric (an
// error message on a span).
func Cut(s string, n int) string {
	n = max(n, 0)
	if len(s) <= n && utf8.ValidString(s) {
		return s
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, string(utf8.RuneError))
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ValidKey reports whether k can be an attribute key of every metric stream
// and span: not empty, valid UTF-8, at most MaxLen bytes, and a key every
// Prometheus exporter can turn into a label. A Prometheus label name is the
// key with each character other than an ASCII letter or digit written as
// '_', and a scrape fails as a whole on a label name made only of
// underscores (a key such as "ключ"), on one starting with "__" (reserved
// by Prometheus, such as "__name__"), and on one equal to a label the
// exporter adds itself ("otel_scope_name" and the other otel_scope_*
// labels). And "le" (a histogram bucket's bound) or "quantile" (a
// summary's) would stand twice on a series, which Prometheus refuses as a
// whole target. So a valid key has an ASCII letter or digit, its label name
// starts neither with "__" nor with "otel_scope_", and is neither "le" nor
// "quantile".
func ValidKey(k attribute.Key) bool {
	if k == "" || len(k) > MaxLen || !utf8.ValidString(string(k)) {
		return false
	}
	label := LabelName(string(k))
	return strings.Trim(label, "_") != "" && !strings.HasPrefix(label, "__") &&
		!strings.HasPrefix(collapse(label), "otel_scope_") && label != "le" && label != "quantile"
}

// LabelName is the Prometheus label name of the attribute key k: every
// character other than an ASCII letter or digit written as '_'. Two keys
// with one label name share a Prometheus label.
func LabelName(k string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, k)
}

// collapse writes every run of '_' in label as one, as an exporter that
// collapses underscores does.
func collapse(label string) string {
	for strings.Contains(label, "__") {
		label = strings.ReplaceAll(label, "__", "_")
	}
	return label
}

// KeyValue returns kv with its string value (or every element of its string
// slice value) cleaned by String. Other kinds are returned unchanged.
func KeyValue(kv attribute.KeyValue) attribute.KeyValue {
	switch kv.Value.Type() {
	case attribute.STRING:
		if s := kv.Value.AsString(); String(s) != s {
			return kv.Key.String(String(s))
		}
	case attribute.STRINGSLICE:
		ss := kv.Value.AsStringSlice()
		changed := false
		for i, s := range ss {
			if c := String(s); c != s {
				ss[i], changed = c, true
			}
		}
		if changed {
			return kv.Key.StringSlice(ss)
		}
	}
	return kv
}

// Int64 converts v to an int64 attribute value, capped at the largest
// int64 rather than wrapping to a negative number.
func Int64(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}
