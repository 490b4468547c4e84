package attrvalue

import (
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
)

func TestString(t *testing.T) {
	long := strings.Repeat("a", MaxLen+10)
	// 255 ASCII bytes then a 3-byte rune: the cut must not split it.
	straddle := strings.Repeat("a", MaxLen-1) + "€" + "tail"
	testCases := []struct {
		name, in, want string
	}{
		{"clean", "checkout", "checkout"},
		{"empty", "", ""},
		{"NUL and non-ASCII kept", "a\x00é€", "a\x00é€"},
		{"invalid bytes replaced", "bad\xff\xfe", "bad\uFFFD"},
		{"lone continuation byte", "a\x80b", "a\uFFFDb"},
		{"too long cut", long, long[:MaxLen]},
		{"cut on a rune boundary", straddle, strings.Repeat("a", MaxLen-1)},
		{"exactly MaxLen", long[:MaxLen], long[:MaxLen]},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got := String(tc.in)
			if got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if !utf8.ValidString(got) || len(got) > MaxLen {
				t.Errorf("String(%q) = %q: invalid or longer than %d", tc.in, got, MaxLen)
			}
		})
	}
}

func TestStringDoesNotAllocateWhenClean(t *testing.T) {
	s := strings.Repeat("x", 64)
	if n := testing.AllocsPerRun(100, func() { _ = String(s) }); n != 0 {
		t.Errorf("String of a clean value allocated %v times", n)
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"", "ok", "bad\xff", strings.Repeat("é", 200), "\x00\x80\xc0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := String(s)
		if !utf8.ValidString(got) || len(got) > MaxLen {
			t.Fatalf("String(%q) = %q: invalid or longer than %d", s, got, MaxLen)
		}
		if utf8.ValidString(s) && len(s) <= MaxLen && got != s {
			t.Fatalf("String changed a clean value %q to %q", s, got)
		}
		if String(got) != got {
			t.Fatalf("String is not idempotent on %q", s)
		}
	})
}

func TestKeyValue(t *testing.T) {
	testCases := []struct {
		name string
		in   attribute.KeyValue
		want attribute.KeyValue
	}{
		{"string", attribute.String("k", "x\xff"), attribute.String("k", "x\uFFFD")},
		{"clean string", attribute.String("k", "x"), attribute.String("k", "x")},
		{"slice", attribute.StringSlice("k", []string{"ok", "\xfe"}), attribute.StringSlice("k", []string{"ok", "\uFFFD"})},
		{"int", attribute.Int("k", 3), attribute.Int("k", 3)},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := KeyValue(tc.in); got != tc.want {
				t.Errorf("KeyValue(%v) = %v, want %v", tc.in.Value.String(), got.Value.String(), tc.want.Value.String())
			}
		})
	}
}

func TestValidKey(t *testing.T) {
	for k, want := range map[attribute.Key]bool{
		"": false, "a.b": true, "a\xff": false, "1abc": true, "le": false, "quantile": false, "l.e": true, "le2": true, "a\x00b": true,
		"ключ": false, "._-": false, "__name__": false, "..x": false, "_x": true,
		"otel_scope_name": false, "otel.scope.version": false, "otel__scope_x": false, "otel.scoped": true,
		attribute.Key(strings.Repeat("k", MaxLen)): true, attribute.Key(strings.Repeat("k", MaxLen+1)): false,
	} {
		if got := ValidKey(k); got != want {
			t.Errorf("ValidKey(%q) = %v, want %v", k, got, want)
		}
	}
}

func TestCut(t *testing.T) {
	testCases := []struct {
		name, in string
		n        int
		want     string
	}{
		{"within bound", "abc", 3, "abc"},
		{"cut", "abcdef", 4, "abcd"},
		{"cut before a split rune", "ab€", 3, "ab"},
		{"invalid then cut", "\xff\xffabc", 4, "\uFFFDa"},
		{"zero bound", "abc", 0, ""},
		{"negative bound", "abc", -1, ""},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got := Cut(tc.in, tc.n)
			if got != tc.want {
				t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
			if !utf8.ValidString(got) || len(got) > max(tc.n, 0) {
				t.Errorf("Cut(%q, %d) = %q: invalid or too long", tc.in, tc.n, got)
			}
		})
	}
}

func TestInt64(t *testing.T) {
	for in, want := range map[uint64]int64{0: 0, 7: 7, 1<<63 - 1: 1<<63 - 1, 1 << 63: 1<<63 - 1, ^uint64(0): 1<<63 - 1} {
		if got := Int64(in); got != want {
			t.Errorf("Int64(%d) = %d, want %d", in, got, want)
		}
	}
}
