package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// ClaimDue claims due jobs of one state for req.Owner (see store.Work),
// in one transaction: the due jobs are read oldest first through the
// state index and locked FOR UPDATE SKIP LOCKED, so concurrent claimers,
// in this process or another, pass over each other's jobs instead of
// waiting for them and never claim one twice; each is then rewritten as
// claimed. The claim is committed when ClaimDue returns.
//
// Jobs of req.SkipHosts are passed over by the query itself, on the host
// column, without reading their records. req.Admit is asked about a job
// once its row is locked; a host it refuses is passed over for the rest
// of the call, its other jobs not asked about, and a call passes over at
// most 4×Limit jobs so.
func (db *DB) ClaimDue(ctx context.Context, req store.ClaimRequest) ([]store.Claim, error) {
	s := req.State
	if s != store.StatePending && s != store.StateUnknown {
		return nil, fmt.Errorf("store: only pending or unknown jobs are claimed, not %s", s)
	}
	if err := db.usable(ctx); err != nil {
		return nil, err
	}
	if req.Limit <= 0 {
		return nil, nil
	}
	var out []store.Claim
	err := db.tx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		if req.Owner != "" {
			alive, err := db.alive(ctx, tx, req.Owner, req.Now)
			if err != nil {
				return err
			}
			if !alive {
				return fmt.Errorf("%w: runner %s claims without a live lease", store.ErrLeaseLost, req.Owner)
			}
		}
		// A record that does not decode is passed over (Check reports
		// it), and the query asks again for more in its place, past the
		// jobs this transaction holds already (its own locks do not make
		// SKIP LOCKED pass over them).
		skip := []string{}
		// Hosts Admit refused are passed over for the rest of the call
		// (their jobs after the first are not asked about), and so many
		// jobs passed over end the call: Admit is asked boundedly often.
		hosts := skipList(req.SkipHosts)
		passed := 0
		b := &pgx.Batch{}
		for len(out) < req.Limit && passed < 4*req.Limit {
			rows, err := tx.Query(ctx, db.q.due, string(s), nanos(req.Now), skip, req.Limit-len(out), hosts)
			if err != nil {
				return err
			}
			got, bad := 0, 0
			for rows.Next() {
				got++
				var id string
				var rec []byte
				if err := rows.Scan(&id, &rec); err != nil {
					rows.Close()
					return err
				}
				j, err := decodeJob(rec)
				skip = append(skip, id)
				if err != nil || j.ID != id {
					bad++
					continue
				}
				if req.Admit != nil && !admitted(req.Admit, store.ClaimHost(j), &hosts) {
					bad++
					passed++
					continue
				}
				c, err := claimed(j, s, req.Now, req.Owner, req.Prepare)
				if err != nil {
					rows.Close()
					return err
				}
				b.Queue(db.q.update, c.updateArgs()...)
				out = append(out, store.ClaimOf(j))
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if bad == 0 || got == 0 {
				break
			}
		}
		if b.Len() == 0 {
			return nil
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// alive reports whether runner owner holds a live lease at now.
func (db *DB) alive(ctx context.Context, tx pgx.Tx, owner string, now time.Time) (bool, error) {
	var expires int64
	err := tx.QueryRow(ctx, db.q.leaseExpires, owner).Scan(&expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return nanos(now) < expires, nil
}

// claimed turns a due job of state s into its claimed form (a new fence
// and owner; pending becomes running with one more attempt, unknown counts
// one more status query), lets prepare add to it and encodes it.
func claimed(j *store.Job, s store.State, now time.Time, owner string, prepare store.ClaimFunc) (cols, error) {
	j.Fence++
	j.Owner = owner
	j.UpdatedAt = now
	if s == store.StatePending {
		j.State = store.StateRunning
		j.Attempts++
		if j.FirstSentAt.IsZero() {
			j.FirstSentAt = now
		}
	} else {
		j.StatusQueries++
	}
	if prepare != nil {
		prepare(j)
	}
	if j.Owner != owner || j.Fence == 0 {
		return cols{}, fmt.Errorf("store: job %s: a claim's prepare must not change its owner or fence", j.ID)
	}
	return colsOf(j)
}

// finishRecord applies fn to a copy of the claimed job and checks the
// change, before anything is sent to the database.
func finishRecord(c store.Claim, fn store.TransitionFunc) (*store.Job, cols, error) {
	old := c.Job
	j := old.Clone()
	if err := fn(j); err != nil {
		return nil, cols{}, err
	}
	if old.State != store.StateRunning && old.State != store.StateUnknown {
		return nil, cols{}, &store.TransitionError{JobID: old.ID, From: old.State, To: j.State, Why: "only a claimed job (running, or unknown under a status query) is finished by its claim"}
	}
	if j.ID != old.ID || j.Key != old.Key || j.Fence != old.Fence || j.Owner != old.Owner {
		return nil, cols{}, fmt.Errorf("store: job %s: id, key, fence and owner never change in a finish", old.ID)
	}
	if !store.SameRequest(old, j) {
		return nil, cols{}, fmt.Errorf("store: job %s: %w", old.ID, errRequestChanged)
	}
	if j.State != old.State && !store.Legal(old.State, j.State) {
		return nil, cols{}, &store.TransitionError{JobID: j.ID, From: old.State, To: j.State}
	}
	id, err := jobID(j.ID)
	if err != nil {
		return nil, cols{}, err
	}
	j.ID = id
	col, err := colsOf(j)
	if err != nil {
		return nil, cols{}, err
	}
	return j, col, nil
}

// FinishClaim writes the outcome of a claim (see store.Work) in one
// transaction: fn changes a copy of the claimed job, which is checked
// here (the transition table, what never changes); the update then
// writes it only where the stored job is still held by the claim (its
// fence, attempt, owner, and the state and time the claim wrote). With
// next, the due pending or unknown job with the earliest NextRunAt is
// claimed in the same transaction (SKIP LOCKED), so a worker's outcome
// and its next claim cost one commit; its SkipHosts and Admit work as in
// ClaimDue.
func (db *DB) FinishClaim(ctx context.Context, c store.Claim, fn store.TransitionFunc, next *store.NextClaim) (*store.Job, *store.Claim, error) {
	if err := db.usable(ctx); err != nil {
		return nil, nil, err
	}
	if c.Job == nil {
		return nil, nil, fmt.Errorf("store: a claim without its job")
	}
	j, col, err := finishRecord(c, fn)
	if err != nil {
		return nil, nil, err
	}
	if c.Fence > 1<<63-1 {
		return nil, nil, fmt.Errorf("%w: job %s: claim fence %d", store.ErrFenced, j.ID, c.Fence)
	}
	var nc *store.Claim
	err = db.tx(ctx, func(tx pgx.Tx) error {
		nc = nil
		held := false
		if !c.Fenced(c.Job) {
			args := append(col.updateArgs(), int64(c.Fence), int64(c.Attempt), c.Owner, string(c.Job.State), sortNanos(c.Job))
			tag, err := tx.Exec(ctx, db.q.finish, args...)
			if err != nil {
				return err
			}
			held = tag.RowsAffected() == 1
		}
		if !held {
			var exists bool
			if err := tx.QueryRow(ctx, db.q.jobExists, j.ID).Scan(&exists); err != nil {
				return err
			}
			if !exists {
				return fmt.Errorf("%w: job %s", store.ErrNotFound, j.ID)
			}
			return fmt.Errorf("%w: job %s changed since claim %d (attempt %d, runner %s)", store.ErrFenced, j.ID, c.Fence, c.Attempt, c.Owner)
		}
		if next == nil {
			return nil
		}
		nc, err = db.claimNext(ctx, tx, *next)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return j, nc, nil
}

// claimNext claims, in a finish's transaction, the due pending or unknown
// job with the earliest NextRunAt (pending first on a tie). It claims
// nothing for an owner without a live lease; its refusals never undo the
// finish, only its database errors do.
func (db *DB) claimNext(ctx context.Context, tx pgx.Tx, next store.NextClaim) (*store.Claim, error) {
	if next.Owner != "" {
		alive, err := db.alive(ctx, tx, next.Owner, next.Now)
		if err != nil || !alive {
			return nil, err
		}
	}
	hosts := skipList(next.SkipHosts)
	// Bounded: each round that Admit refuses passes over one or two
	// hosts more.
	for range 4 {
		pick, err := db.nextCandidates(ctx, tx, next, &hosts)
		if err != nil || pick == nil {
			return nil, err
		}
		if pick.job == nil {
			continue // refused by Admit: ask again past its hosts
		}
		prepare := next.Pending
		if pick.s == store.StateUnknown {
			prepare = next.Unknown
		}
		col, err := claimed(pick.job, pick.s, next.Now, next.Owner, prepare)
		if err != nil {
			// The finish stands: leave the job to ClaimDue, which reports it.
			return nil, nil
		}
		if _, err := tx.Exec(ctx, db.q.update, col.updateArgs()...); err != nil {
			return nil, err
		}
		cl := store.ClaimOf(pick.job)
		return &cl, nil
	}
	return nil, nil
}

// candidate is a due job claimNext may claim, as locked.
type candidate struct {
	s    store.State
	sort int64
	job  *store.Job
}

// nextCandidates locks the earliest due pending and unknown job whose
// host is not in hosts, and returns the earlier one Admit takes (pending
// first on a tie). It returns nil when nothing is due, and a candidate
// without a job when Admit refused them all (their hosts are then added
// to hosts).
func (db *DB) nextCandidates(ctx context.Context, tx pgx.Tx, next store.NextClaim, hosts *[]string) (*candidate, error) {
	var cands []candidate
	rows, err := tx.Query(ctx, db.q.nextDue, nanos(next.Now), *hosts)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id, s string
		var sort int64
		var rec []byte
		if err := rows.Scan(&id, &s, &sort, &rec); err != nil {
			rows.Close()
			return nil, err
		}
		j, err := decodeJob(rec)
		if err != nil || j.ID != id {
			continue // damaged: Check reports it; ClaimDue passes over it too
		}
		cands = append(cands, candidate{store.State(s), sort, j})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(cands) == 0 {
		return nil, nil
	}
	if len(cands) == 2 && cands[1].sort < cands[0].sort {
		cands[0], cands[1] = cands[1], cands[0]
	}
	for i := range cands {
		if next.Admit == nil || admitted(next.Admit, store.ClaimHost(cands[i].job), hosts) {
			return &cands[i], nil
		}
	}
	return &candidate{}, nil
}

// skipList is hosts as a claim query's array: never nil, which the
// database would take for NULL, and a copy, so hosts refused later are
// added to it alone.
func skipList(hosts []string) []string {
	return append([]string{}, hosts...)
}

// admitted asks admit about host unless it refused it already in this
// call (it is then in skip); a refused host is added to skip.
func admitted(admit func(string) bool, host string, skip *[]string) bool {
	if slices.Contains(*skip, host) {
		return false
	}
	if admit(host) {
		return true
	}
	*skip = append(*skip, host)
	return false
}
