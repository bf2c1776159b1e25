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
