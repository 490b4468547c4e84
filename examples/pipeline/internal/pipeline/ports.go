package pipeline

import (
	"fmt"
	"net"
)

// freeAddrs returns n distinct loopback addresses ("127.0.0.1:port") that no
// one listened on at the moment of the call. The ports are released before
// returning, so another program could take one first; the process given it
// then fails to start and the test reports its log.
func freeAddrs(n int) ([]string, error) {
	// Hold every listener until all are chosen, so the n ports differ.
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}
