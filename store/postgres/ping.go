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
	conn, err := connectOne(ctx, r, url, "connect to", r.location())
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// connectOne opens one connection to url for an operation (verb) on
// where, its failure a *ConnectError (or the URL's parse error) with r's
// secrets removed.
func connectOne(ctx context.Context, r redactor, url, verb, where string) (*pgx.Conn, error) {
	if err := checkUserInfo(r, url); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, r.parseError(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, asConnectError(r.wrap(fmt.Errorf("store: %s %s: %w", verb, where, err)), where)
	}
	return conn, nil
}
