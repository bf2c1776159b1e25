package main

import (
	"fmt"
	"net"
	"strconv"
)

// splitHostPort parses HOST:PORT for --listen.
func splitHostPort(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("--listen %q: want HOST:PORT, for example 127.0.0.1:4222", s)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("--listen %q: port must be a number from 0 to 65535", s)
	}
	return host, port, nil
}

// portFree checks that the embedded server can listen on host:port before it starts (whose
// own bind error would come after many lines of its log): a port in use is one line naming it
// and --listen. Port 0 (any free port) is always free.
func portFree(host string, port int) error {
	if port <= 0 {
		return nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--listen %s: cannot listen there (%v): is another groupstate serve or NATS server using it? choose another address with --listen HOST:PORT", addr, err)
	}
	return l.Close()
}
