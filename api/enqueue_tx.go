package api

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store/postgres"
)

// EnqueueTx validates a job and enqueues it inside the application's own
// pgx transaction tx, on the Postgres database this client has open: the
// job exists if and only if tx commits, so a row the application writes
// and the request it calls for are stored together or not at all (the
// outbox pattern). tx may come from the application's own pool; it must
// be on the same database.
//
// The key rules are Enqueue's: the same request under its key returns the
// stored job with Existing set; another request is refused with an error
// matching ErrKeyConflict, and tx stays usable for the application's
// other writes. Runners see the job once tx commits. On a bbolt file, or
// through a runner's admin API, it returns ErrNotOffered.
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, req Request, o EnqueueOptions) (EnqueueResult, error) {
	pg, ok := c.st.(*postgres.DB)
	if !ok {
		return EnqueueResult{}, fmt.Errorf("%w: EnqueueTx enqueues in a Postgres transaction, and %s is not a Postgres database", ErrNotOffered, c.where)
	}
	j, err := c.BuildJob(req, o)
	if err != nil {
		return EnqueueResult{}, err
	}
	res, err := pg.EnqueueTx(ctx, tx, j)
	if err != nil {
		return EnqueueResult{}, err
	}
	return EnqueueResult{Job: c.view(res.Job), Existing: res.Existing}, nil
}
