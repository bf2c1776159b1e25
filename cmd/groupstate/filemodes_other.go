//go:build !unix

package main

// restrictFileModes does nothing where there is no umask; the data directory's ACLs decide.
func restrictFileModes() {}
