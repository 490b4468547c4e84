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

// ValidKey reports whether k can be an attribute key: not empty, valid UTF-8.
func ValidKey(k attribute.Key) bool {
	return k != "" && utf8.ValidString(string(k))
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
