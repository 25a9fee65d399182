package main

// runnel token create|delete: API tokens (Authorization: Bearer) acting as
// the logged-in user.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/runnel/runnel/api"
)

func newTokenCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Create and revoke API tokens (use them with --token or RUNNEL_TOKEN)"}
	cmd.AddCommand(newTokenCreateCommand(g), newTokenDeleteCommand(g))
	return cmd
}

func newTokenCreateCommand(g *globalFlags) *cobra.Command {
	var expires time.Duration
	var desc string
	cmd := &cobra.Command{Use: "create", Short: "Create a token acting as you; it is printed once", Args: cobra.NoArgs}
	cmd.Flags().DurationVar(&expires, "expires-in", api.DefaultTokenLifetime, "lifetime of the token (at most 8784h)")
	cmd.Flags().StringVar(&desc, "description", "", "what the token is for")
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, _ []string) error {
		var tok api.NewToken
		req := api.TokenRequest{Description: desc, ExpiresInSeconds: int64(expires / time.Second)}
		return g.show(ctx, cmd, c, apiRequest{method: http.MethodPost, path: "/v1/tokens", body: req}, &tok,
			func(w io.Writer) error {
				fmt.Fprintln(w, tok.Token)
				fmt.Fprintf(cmd.ErrOrStderr(), "Token %s acts as %s until %s; it is shown only now (use it as RUNNEL_TOKEN).\n",
					tok.ID, tok.Principal, tok.ExpiresAt.Format(time.RFC3339))
				return nil
			})
	})
	return cmd
}

func newTokenDeleteCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "delete ID", Aliases: []string{"rm", "revoke"}, Short: "Revoke a token", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		if _, err := c.do(ctx, apiRequest{method: http.MethodDelete, path: "/v1/tokens/" + url.PathEscape(args[0])}); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Revoked token %s.\n", args[0])
		return nil
	})
	return cmd
}
