package toolchain_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/groupstate/groupstate/internal/toolchain"
)

// A missing toolchain is one line saying what is missing and how to install it.
func ExampleMissingError() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	defer os.Setenv("PATH", os.Getenv("PATH"))
	os.Setenv("PATH", dir) // no compiler there
	os.WriteFile(dir+"/go.mod", []byte("module example.com/logins\n"), 0o644)

	_, err := toolchain.Plan(toolchain.Project{Dir: dir})
	var m *toolchain.MissingError
	fmt.Println(errors.Is(err, toolchain.ErrMissing), errors.As(err, &m), m.Lang)
	fmt.Println(err)
	// Output:
	// true true go
	// go: go not found on PATH; install Go from https://go.dev/dl
}
