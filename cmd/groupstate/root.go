package main

import (
	"github.com/spf13/cobra"
)

// newRootCommand returns the groupstate command with every subcommand, ready to execute once.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "groupstate",
		Short: "Stateful stream processing with handlers compiled to WebAssembly",
		Long: `groupstate runs custom stateful stream processing (Spark's flatMapGroupsWithState)
with the per-key function compiled to WebAssembly from Go, Rust, C or AssemblyScript.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       "set below", // so that cobra adds --version
	}
	root.SetVersionTemplate("{{.Version}}")
	root.Version = versionText()
	root.AddCommand(
		newServeCommand(),
		newDeployCommand(),
		newUndeployCommand(),
		newListCommand(),
		newStatusCommand(),
		newStateCommand(),
		newReplayCommand(),
		newDiffCommand(),
		newPromoteCommand(),
		newAuthCommand(),
		newPubCommand(),
		newTailCommand(),
		newTestCommand(),
		newInitCommand(),
		newBuildCommand(),
		newDemoCommand(),
		newBenchCommand(),
		newVersionCommand(),
	)
	return root
}
