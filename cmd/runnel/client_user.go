package main

// runnel user create|list|delete: the users (SCRAM credentials) Kafka
// SASL and HTTP Basic clients log in as.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runnel/runnel/api"
)

func newUserCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Create, list and delete users (SASL/SCRAM and HTTP Basic credentials)"}
	cmd.AddCommand(newUserCreateCommand(g), newUserListCommand(g), newUserDeleteCommand(g))
	return cmd
}

func newUserCreateCommand(g *globalFlags) *cobra.Command {
	var pwdFile, mechanism string
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a user or set its password for one SCRAM mechanism",
		Long: "Create a user or set its password for one SCRAM mechanism. The password is read\n" +
			"from --user-password-file, else from the first line of standard input\n" +
			"(never from a flag: flags show in ps).",
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&pwdFile, "user-password-file", "", "file holding the new user's password (surrounding whitespace trimmed); default: read a line from stdin")
	cmd.Flags().StringVar(&mechanism, "mechanism", "SCRAM-SHA-256", "SCRAM-SHA-256 or SCRAM-SHA-512")
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		pwd, err := readNewPassword(cmd, pwdFile)
		if err != nil {
			return err
		}
		var u api.User
		req := apiRequest{method: http.MethodPost, path: "/v1/users", body: api.UserRequest{Name: args[0], Password: pwd, Mechanism: mechanism}}
		return g.show(ctx, cmd, c, req, &u, func(io.Writer) error {
			fmt.Fprintf(cmd.ErrOrStderr(), "User %s has credentials for %s.\n", u.Name, strings.Join(u.Mechanisms, ", "))
			return nil
		})
	})
	return cmd
}

// readNewPassword reads the password from file, or one line of stdin.
func readNewPassword(cmd *cobra.Command, file string) (string, error) {
	var raw string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--user-password-file: %w", err)
		}
		raw = string(b)
	} else {
		line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
		if err != nil && line == "" {
			return "", errors.New("no password: give --user-password-file or a line on standard input")
		}
		raw = line
	}
	if pwd := strings.TrimSpace(raw); pwd != "" {
		return pwd, nil
	}
	return "", errors.New("the password is empty")
}

func newUserListCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "list", Aliases: []string{"ls"}, Short: "List users and their SCRAM mechanisms", Args: cobra.NoArgs}
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, _ []string) error {
		var res api.UserList
		return g.show(ctx, cmd, c, apiRequest{method: http.MethodGet, path: "/v1/users"}, &res, func(w io.Writer) error {
			t := newTable(w, "USER", "MECHANISMS")
			for _, u := range res.Users {
				t.row(u.Name, strings.Join(u.Mechanisms, ","))
			}
			return t.flush()
		})
	})
	return cmd
}

func newUserDeleteCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "delete NAME", Aliases: []string{"rm"}, Short: "Delete a user and all its credentials", Args: cobra.ExactArgs(1)}
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, args []string) error {
		if _, err := c.do(ctx, apiRequest{method: http.MethodDelete, path: "/v1/users/" + url.PathEscape(args[0])}); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Deleted user %s.\n", args[0])
		return nil
	})
	return cmd
}
