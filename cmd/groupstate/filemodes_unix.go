//go:build unix

package main

import "syscall"

// restrictFileModes makes every file and directory serve creates from now on private to
// its user (umask 077): state, compiled modules, the embedded server's storage and the
// runtime's id hold data that no other account of the machine should read.
func restrictFileModes() { syscall.Umask(0o077) }
