package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newDeployCommand returns `groupstate deploy`, which validates a spec and module and stores them in NATS.
func newDeployCommand() *cobra.Command {
	var cf connFlags
	var specPath, modulePath string
	cmd := &cobra.Command{
		Use:   "deploy -f SPEC [--module WASM]",
		Short: "Validate and deploy a handler (redeploying a name replaces the module and keeps state)",
		Long: `Validates the spec and the module (the module is compiled and initialized with the spec's
config, so one that would fail at start is refused now), stores both in NATS, and the runtimes
start it. Redeploying a name replaces the module and keeps the deployment's state.`,
		Example: `  groupstate deploy -f samples/logincount/logincount.yaml
  groupstate deploy -f my.yaml --module build/handler.wasm`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sp, wasm, err := loadSpecAndModule(specPath, modulePath)
			if err != nil {
				return err
			}
			c, done, err := cf.client(cmd, "deploy")
			if err != nil {
				return err
			}
			defer done()
			d, err := c.Deploy(cmd.Context(), sp, wasm)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deployed %s (module sha256 %s, %d bytes, revision %d)\n", d.Name, d.ModuleDigest, d.ModuleSize, d.Revision)
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVarP(&specPath, "file", "f", "", "deployment spec (YAML)")
	cmd.Flags().StringVar(&modulePath, "module", "", "module to deploy instead of the spec's module")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// newUndeployCommand returns `groupstate undeploy`, which stops a deployment and keeps its state.
func newUndeployCommand() *cobra.Command {
	var cf connFlags
	cmd := &cobra.Command{
		Use:     "undeploy NAME",
		Short:   "Stop a deployment (its state stays on disk; deploying the name again resumes it)",
		Example: `  groupstate undeploy logincount`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, done, err := cf.client(cmd, "undeploy")
			if err != nil {
				return err
			}
			defer done()
			if err := c.Undeploy(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "undeployed %s\n", args[0])
			return nil
		},
	}
	cf.register(cmd)
	return cmd
}
