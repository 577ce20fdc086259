package main

import (
	"context"
	"fmt"

	"github.com/idemrun/idemrun/api"
)

// migrate creates or upgrades idemrun's schema in a Postgres database.
// Every node may run it as it starts: it does nothing on a schema that is
// up to date, and nodes that run it at once take turns.
func (m *Main) migrate(ctx context.Context, args []string) error {
	fs, db := m.flags("migrate", "--db postgres://... [--schema S]")
	if err := m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("migrate: unexpected argument %q", fs.Arg(0))
	}
	dbt, err := m.db(fs, *db)
	if err != nil {
		return err
	}
	if !dbt.isURL() {
		return &api.InvalidError{Field: "db", Value: fmt.Sprintf("%q", dbt.path), Accepted: "a postgres:// or postgresql:// URL (a bbolt file needs no migrate: commands create and upgrade it)"}
	}
	if err := api.Migrate(ctx, dbt.path, dbt.options(&api.Options{})); err != nil {
		return openDBError(dbt, err)
	}
	fmt.Fprintf(m.Stdout, "migrate: %s: schema %s is at version %d\n", api.Redacted(dbt.path), schemaOrDefault(dbt), api.SchemaVersion)
	return nil
}
