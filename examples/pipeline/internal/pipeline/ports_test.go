package pipeline

import (
	"net"
	"strings"
	"testing"
)

func TestFreeAddrs(t *testing.T) {
	addrs, err := freeAddrs(6)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 6 {
		t.Fatalf("got %d addresses, want 6", len(addrs))
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("%s is not a loopback address", a)
		}
		if seen[a] {
			t.Errorf("%s returned twice", a)
		}
		seen[a] = true
		// Released: it can be listened on again.
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("listen on %s: %v", a, err)
			continue
		}
		l.Close()
	}
}
