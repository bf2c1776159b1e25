package main

import (
	"log/slog"
	"os"
	"path/filepath"
)

// defaultCacheDir is where compiled modules are kept between runs: the user's cache
// directory, or none when there is no such directory.
func defaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "groupstate", "compiled")
}

// quietLogger logs warnings and errors to standard error.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
