package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Ping connects to the database url names and disconnects, without
// looking for idemrun's schema: for a tool that makes a schema of its own
// (the bench, the demo) and must first tell a server it cannot use apart
// from its own failures. A connection that cannot be made is a
// *ConnectError naming the problem, a URL that does not parse an error
// saying so; neither names the URL's password.
func Ping(ctx context.Context, url string) error {
	r := newRedactor(url)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return r.parseError(err)
	}
	where := r.location()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return asConnectError(r.wrap(fmt.Errorf("store: connect to %s: %w", where, err)), where)
	}
	return conn.Close(ctx)
}
