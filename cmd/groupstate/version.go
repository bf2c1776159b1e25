package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/abi"
)

// newVersionCommand returns `groupstate version`.
func newVersionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print the groupstate version, the ABI version it runs and the Go version it was built with",
		Example: `  groupstate version
  groupstate version --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(readVersion())
			}
			fmt.Fprint(cmd.OutOrStdout(), versionText())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the version as JSON")
	return cmd
}

// versionInfo is what `groupstate version` says.
type versionInfo struct {
	Version     string   `json:"version"`
	ABIVersions []uint32 `json:"abi_versions"`
	GoVersion   string   `json:"go_version"`
	Revision    string   `json:"revision,omitempty"`
}

// readVersion reads the version from the binary's build information.
func readVersion() versionInfo {
	v := versionInfo{Version: "(devel)", ABIVersions: []uint32{abi.Version, abi.Version2}}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		v.GoVersion = bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v.Revision = s.Value
			}
		}
	}
	return v
}

// versionText is what `groupstate version` and `groupstate --version` print: the version,
// the ABI versions it runs, the Go version it was built with and its VCS revision.
func versionText() string {
	v := readVersion()
	text := fmt.Sprintf("groupstate %s\nABI versions %d and %d\n%s\n", v.Version, v.ABIVersions[0], v.ABIVersions[1], v.GoVersion)
	if v.Revision != "" {
		text += fmt.Sprintf("revision %s\n", v.Revision)
	}
	return text
}
