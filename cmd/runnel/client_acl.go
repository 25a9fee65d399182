package main

// runnel acl create|list|delete: Kafka's ACLs, enforced on both doors with
// --auth required.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/runnel/runnel/api"
)

func newACLCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "acl", Short: "Create, list and delete ACLs (Kafka's model, both doors)"}
	cmd.AddCommand(newACLCreateCommand(g), newACLListCommand(g), newACLDeleteCommand(g))
	return cmd
}

// aclFlags registers one flag per ACL field.
func aclFlags(fs *pflag.FlagSet, a *api.ACL, defaults bool) {
	def := func(v string) string {
		if defaults {
			return v
		}
		return ""
	}
	fs.StringVar(&a.ResourceType, "resource-type", def("topic"), "topic, group, cluster or transactional_id")
	fs.StringVar(&a.ResourceName, "resource-name", "", "resource name, * for any, or a prefix with --pattern-type prefixed (the cluster: kafka-cluster)")
	fs.StringVar(&a.PatternType, "pattern-type", def("literal"), "literal or prefixed")
	fs.StringVar(&a.Principal, "principal", "", "User:name, or User:* for everyone")
	fs.StringVar(&a.Host, "host", def("*"), "client IP address, or * for any")
	fs.StringVar(&a.Operation, "operation", "", "read, write, create, delete, alter, describe, describe_configs, alter_configs, cluster_action, idempotent_write or all")
	fs.StringVar(&a.Permission, "permission", def("allow"), "allow or deny")
}

func aclQuery(a api.ACL) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"resource_type": a.ResourceType, "resource_name": a.ResourceName, "pattern_type": a.PatternType,
		"principal": a.Principal, "host": a.Host, "operation": a.Operation, "permission": a.Permission} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

func writeACLs(cmd *cobra.Command, g *globalFlags, raw []byte, acls []api.ACL) error {
	if g.json() {
		return writeJSON(cmd.OutOrStdout(), raw)
	}
	t := newTable(cmd.OutOrStdout(), "PRINCIPAL", "PERMISSION", "OPERATION", "RESOURCE", "NAME", "PATTERN", "HOST")
	for _, a := range acls {
		t.row(a.Principal, a.Permission, a.Operation, a.ResourceType, a.ResourceName, a.PatternType, a.Host)
	}
	return t.flush()
}

func newACLCreateCommand(g *globalFlags) *cobra.Command {
	var a api.ACL
	cmd := &cobra.Command{Use: "create", Short: "Create an ACL", Args: cobra.NoArgs,
		Example: "  runnel acl create --principal User:alice --operation write --resource-name orders"}
	aclFlags(cmd.Flags(), &a, true)
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, _ []string) error {
		if a.Principal == "" || a.Operation == "" || a.ResourceName == "" {
			return errors.New("--principal, --operation and --resource-name are required")
		}
		var created api.ACL
		raw, err := c.getJSON(ctx, apiRequest{method: http.MethodPost, path: "/v1/acls", body: a}, &created)
		if err != nil {
			return err
		}
		return writeACLs(cmd, g, raw, []api.ACL{created})
	})
	return cmd
}

func newACLListCommand(g *globalFlags) *cobra.Command {
	var f api.ACL
	cmd := &cobra.Command{Use: "list", Aliases: []string{"ls"}, Short: "List ACLs (the flags filter)", Args: cobra.NoArgs}
	aclFlags(cmd.Flags(), &f, false)
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, _ []string) error {
		var res api.ACLList
		raw, err := c.getJSON(ctx, apiRequest{method: http.MethodGet, path: "/v1/acls", query: aclQuery(f)}, &res)
		if err != nil {
			return err
		}
		return writeACLs(cmd, g, raw, res.ACLs)
	})
	return cmd
}

func newACLDeleteCommand(g *globalFlags) *cobra.Command {
	var f api.ACL
	cmd := &cobra.Command{Use: "delete", Aliases: []string{"rm"}, Short: "Delete the ACLs the flags select (at least one)", Args: cobra.NoArgs}
	aclFlags(cmd.Flags(), &f, false)
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, _ []string) error {
		var res api.ACLList
		raw, err := c.getJSON(ctx, apiRequest{method: http.MethodDelete, path: "/v1/acls", query: aclQuery(f)}, &res)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Deleted %d ACL(s).\n", len(res.ACLs))
		return writeACLs(cmd, g, raw, res.ACLs)
	})
	return cmd
}
