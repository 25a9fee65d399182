package main

// runnel quota set|list|delete: Kafka's client quotas, enforced on both
// doors (GET|PUT /v1/quotas).

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/runnel/runnel/api"
)

func newQuotaCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "quota", Short: "Set, list and delete client quotas (Kafka's model, both doors)"}
	cmd.AddCommand(newQuotaSetCommand(g), newQuotaListCommand(g), newQuotaDeleteCommand(g))
	return cmd
}

func quotaEntityFlags(fs *pflag.FlagSet, e *api.QuotaEntity) {
	fs.StringVar(&e.User, "user-name", "", "the user the quota applies to")
	fs.BoolVar(&e.DefaultUser, "default-user", false, "every user without a quota of its own")
	fs.StringVar(&e.ClientID, "client-id", "", "the Kafka client id the quota applies to")
	fs.BoolVar(&e.DefaultClientID, "default-client-id", false, "every client id without a quota of its own")
}

func needEntity(e api.QuotaEntity) error {
	if e == (api.QuotaEntity{}) {
		return errors.New("name the entity: --user-name, --default-user, --client-id or --default-client-id")
	}
	return nil
}

func writeQuotas(cmd *cobra.Command, g *globalFlags, raw []byte, qs []api.Quota) error {
	if g.json() {
		return writeJSON(cmd.OutOrStdout(), raw)
	}
	name := func(n string, def bool) string {
		if def {
			return "<default>"
		}
		return n
	}
	num := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatFloat(*v, 'f', -1, 64)
	}
	t := newTable(cmd.OutOrStdout(), "USER", "CLIENT-ID", "PRODUCER-BYTE-RATE", "CONSUMER-BYTE-RATE", "REQUEST-PERCENTAGE")
	for _, q := range qs {
		t.row(name(q.Entity.User, q.Entity.DefaultUser), name(q.Entity.ClientID, q.Entity.DefaultClientID),
			num(q.ProducerByteRate), num(q.ConsumerByteRate), num(q.RequestPercentage))
	}
	return t.flush()
}

func putQuota(ctx context.Context, cmd *cobra.Command, g *globalFlags, c *apiClient, q api.Quota) error {
	var out api.Quota
	raw, err := c.getJSON(ctx, apiRequest{method: http.MethodPut, path: "/v1/quotas", body: q}, &out)
	if err != nil {
		return err
	}
	return writeQuotas(cmd, g, raw, []api.Quota{out})
}

func newQuotaSetCommand(g *globalFlags) *cobra.Command {
	var q api.Quota
	var produce, consume, pct float64
	cmd := &cobra.Command{Use: "set", Short: "Set an entity's quota (the values given replace its values)", Args: cobra.NoArgs,
		Example: "  runnel quota set --user-name alice --producer-byte-rate 1048576"}
	quotaEntityFlags(cmd.Flags(), &q.Entity)
	cmd.Flags().Float64Var(&produce, "producer-byte-rate", 0, "bytes per second the entity may produce")
	cmd.Flags().Float64Var(&consume, "consumer-byte-rate", 0, "bytes per second the entity may fetch")
	cmd.Flags().Float64Var(&pct, "request-percentage", 0, "percent of one request thread's time")
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, _ []string) error {
		if err := needEntity(q.Entity); err != nil {
			return err
		}
		for _, f := range []struct {
			flag string
			v    float64
			dst  **float64
		}{{"producer-byte-rate", produce, &q.ProducerByteRate}, {"consumer-byte-rate", consume, &q.ConsumerByteRate}, {"request-percentage", pct, &q.RequestPercentage}} {
			if cmd.Flags().Changed(f.flag) {
				v := f.v
				*f.dst = &v
			}
		}
		if q.ProducerByteRate == nil && q.ConsumerByteRate == nil && q.RequestPercentage == nil {
			return errors.New("give at least one of --producer-byte-rate, --consumer-byte-rate, --request-percentage (runnel quota delete removes a quota)")
		}
		return putQuota(ctx, cmd, g, c, q)
	})
	return cmd
}

func newQuotaDeleteCommand(g *globalFlags) *cobra.Command {
	var q api.Quota
	cmd := &cobra.Command{Use: "delete", Aliases: []string{"rm"}, Short: "Remove an entity's quota", Args: cobra.NoArgs}
	quotaEntityFlags(cmd.Flags(), &q.Entity)
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, _ []string) error {
		if err := needEntity(q.Entity); err != nil {
			return err
		}
		return putQuota(ctx, cmd, g, c, q)
	})
	return cmd
}

func newQuotaListCommand(g *globalFlags) *cobra.Command {
	var f api.QuotaEntity
	cmd := &cobra.Command{Use: "list", Aliases: []string{"ls"}, Short: "List client quotas (the flags filter)", Args: cobra.NoArgs}
	quotaEntityFlags(cmd.Flags(), &f)
	cmd.RunE = runE(g, func(ctx context.Context, cmd *cobra.Command, c *apiClient, _ []string) error {
		q := url.Values{}
		if f.User != "" {
			q.Set("user", f.User)
		}
		if f.ClientID != "" {
			q.Set("client_id", f.ClientID)
		}
		if f.DefaultUser {
			q.Set("default_user", "true")
		}
		if f.DefaultClientID {
			q.Set("default_client_id", "true")
		}
		var res api.QuotaList
		raw, err := c.getJSON(ctx, apiRequest{method: http.MethodGet, path: "/v1/quotas", query: q}, &res)
		if err != nil {
			return err
		}
		return writeQuotas(cmd, g, raw, res.Quotas)
	})
	return cmd
}
