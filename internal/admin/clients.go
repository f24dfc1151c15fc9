package admin

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/evalmeter/evalmeter/internal/cli"
	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
)

const clientsUsage = `clients grant --client-id ID --hours N [--valid-until RFC3339] [--order-reference REF] [--low-credit-threshold N] [--rotate-key [--rotation-grace D]]
       evalmeter clients show --client-id ID
       evalmeter clients events --client-id ID [--since TIME] [--output json|csv]
       evalmeter clients report --month YYYY-MM [--output json|csv]`

// clients provisions clients straight into PostgreSQL, for development and
// installs without Kubernetes. The operator uses the same ledger calls.
func clients(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || !slices.Contains([]string{"grant", "show", "events", "report"}, args[0]) {
		fmt.Fprintf(stderr, "Usage: evalmeter %s\n", clientsUsage)
		return 2
	}
	fs := cli.NewFlagSet("clients "+args[0], clientsUsage, stderr)
	dbURL := fs.String("database-url", cli.EnvOr("DATABASE_URL", ""), "PostgreSQL URL (env DATABASE_URL)")
	clientID := fs.String("client-id", "", "the client's id, as in its ClientAgreement")
	hours := fs.Int("hours", -1, "grant: evaluation-hour credits allocated under the written order(s), in all")
	validUntil := fs.String("valid-until", "", "grant: end of the agreement (RFC 3339); empty for none")
	rotate := fs.Bool("rotate-key", false, "grant: issue a new API key for an existing client and revoke its others")
	grace := fs.Duration("rotation-grace", 0, "grant --rotate-key: how long the replaced keys keep working, up to 720h; 0 revokes them at once")
	order := fs.String("order-reference", "", "grant: the written order the allocation is under, kept with its credit event")
	lowCredit := fs.Int("low-credit-threshold", -1, "grant: warn the client (a header on usage) at or below this many remaining hours; -1 for never")
	since := fs.String("since", "", "events: only events at or after this time (RFC 3339 or YYYY-MM-DD, UTC)")
	month := fs.String("month", "", "report: the calendar month, YYYY-MM (UTC)")
	output := fs.String("output", "json", "events, report: json or csv")
	if status, ok := cli.ParseFlags(fs, args[1:]); !ok {
		return status
	}
	if fs.NArg() > 0 {
		return cli.Failf(stderr, "%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	if *dbURL == "" || *clientID == "" && args[0] != "report" {
		return cli.Failf(stderr, "clients: set --client-id, and DATABASE_URL or --database-url")
	}
	if *output != "json" && *output != "csv" {
		return cli.Failf(stderr, "clients %s: --output %q: use json or csv", args[0], *output)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := ledger.Open(ctx, *dbURL, ledger.Options{Timeout: 10 * time.Second})
	if err != nil {
		return cli.Failf(stderr, "clients: %v", err)
	}
	defer store.Close()

	switch args[0] {
	case "show":
		return showClient(ctx, store, *clientID, stdout, stderr)
	case "events":
		return clientEvents(ctx, store, *clientID, *since, *output, stdout, stderr)
	case "report":
		return monthlyReport(ctx, store, *month, *output, stdout, stderr)
	}
	if *hours < 0 {
		return cli.Failf(stderr, "clients grant: set --hours to the credits allocated in all (0 or more)")
	}
	g := ledger.Grant{ClientID: *clientID, AllocatedHours: *hours, Source: "cli", OrderReference: *order}
	if *lowCredit >= 0 {
		g.LowCreditThreshold = lowCredit
	}
	if *validUntil != "" {
		t, err := time.Parse(time.RFC3339, *validUntil)
		if err != nil {
			return cli.Failf(stderr, "clients grant: --valid-until %q is not RFC 3339, e.g. 2027-06-30T23:59:59Z", *validUntil)
		}
		g.ValidUntil = &t
	}
	if err := g.Validate(); err != nil {
		return cli.Failf(stderr, "clients grant: %v", err)
	}
	if *grace < 0 || *grace > 720*time.Hour {
		return cli.Failf(stderr, "clients grant: --rotation-grace %s: use a duration from 0s to 720h", *grace)
	}
	now := time.Now()
	created, err := store.UpsertClient(ctx, g, now)
	if err != nil {
		return cli.Failf(stderr, "clients grant: %v", err)
	}
	if !created && !*rotate {
		fmt.Fprintf(stderr, "client %s: %d hours allocated; its API key is unchanged (--rotate-key issues a new one)\n", g.ClientID, g.AllocatedHours)
		return 0
	}
	key, err := credential.NewAPIKey(rand.Reader)
	if err != nil {
		return cli.Failf(stderr, "clients grant: %v", err)
	}
	hash, _ := credential.HashAPIKey(key)
	revoked, err := store.SetKey(ctx, g.ClientID, hash, now, *grace)
	if err != nil {
		return cli.Failf(stderr, "clients grant: %v", err)
	}
	for _, k := range revoked {
		if k.UsableUntil.IsZero() {
			fmt.Fprintf(stderr, "client %s: API key %s revoked\n", g.ClientID, k.Fingerprint)
		} else {
			fmt.Fprintf(stderr, "client %s: API key %s works until %s, then is revoked\n", g.ClientID, k.Fingerprint, k.UsableUntil.UTC().Format(time.RFC3339))
		}
	}
	fmt.Fprintf(stderr, "client %s: %d hours allocated; API key %s below, shown only this once\n", g.ClientID, g.AllocatedHours, hash.Fingerprint())
	fmt.Fprintln(stdout, key)
	return 0
}

func showClient(ctx context.Context, store *ledger.Store, clientID string, stdout, stderr io.Writer) int {
	c, err := store.Client(ctx, clientID)
	if errors.Is(err, ledger.ErrNotFound) {
		return cli.Failf(stderr, "clients show: no client %q", clientID)
	}
	if err != nil {
		return cli.Failf(stderr, "clients show: %v", err)
	}
	u, err := store.Usage(ctx, clientID, time.Now())
	if err != nil {
		return cli.Failf(stderr, "clients show: %v", err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.Encode(struct {
		ClientID       string     `json:"client_id"`
		AllocatedHours int        `json:"allocated_hours"`
		ConsumedHours  int        `json:"consumed_hours"`
		RemainingHours int        `json:"remaining_hours"`
		ActiveSessions int        `json:"active_sessions"`
		ValidUntil     *time.Time `json:"valid_until"`
	}{u.ClientID, u.AllocatedHours, u.ConsumedHours, u.RemainingHours, u.ActiveSessions, c.ValidUntil})
	return 0
}
