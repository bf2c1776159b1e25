package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/abi"
)

// newVersionCommand returns `groupstate version`.
func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the groupstate version, the ABI version it runs and the Go version it was built with",
		Example: `  groupstate version`,
		Args:    cobra.NoArgs,
		Run:     func(cmd *cobra.Command, _ []string) { fmt.Fprint(cmd.OutOrStdout(), versionText()) },
	}
}

// versionText is what `groupstate version` and `groupstate --version` print: the version,
// the ABI versions it runs, the Go version it was built with and its VCS revision.
func versionText() string {
	version, goVersion, revision := "(devel)", "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	text := fmt.Sprintf("groupstate %s\nABI versions %d and %d\n%s\n", version, abi.Version, abi.Version2, goVersion)
	if revision != "" {
		text += fmt.Sprintf("revision %s\n", revision)
	}
	return text
}
