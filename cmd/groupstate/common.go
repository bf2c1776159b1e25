package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/groupstate/groupstate/runtime/spec"
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

// quietLogger logs warnings and errors to w, the command's standard error.
func quietLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// loadSpecAndModule reads the spec at specPath and the module: modulePath when set, else the
// spec's module (relative to the spec file).
func loadSpecAndModule(specPath, modulePath string) (*spec.Spec, []byte, error) {
	sp, specModule, err := spec.LoadSpec(specPath)
	if err != nil {
		return nil, nil, err
	}
	if modulePath == "" {
		modulePath = specModule
	}
	if modulePath == "" {
		return nil, nil, errors.New("no module: the spec has no module and --module is not set")
	}
	wasm, err := os.ReadFile(modulePath)
	if err != nil {
		return nil, nil, fmt.Errorf("reading module: %w", err)
	}
	return sp, wasm, nil
}
