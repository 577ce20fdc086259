package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrun/idemrun/store"
)

// ClaimDue claims due jobs of one state for req.Owner (see store.Work),
// in one transaction: the due jobs are read oldest first through the
// state index and locked FOR UPDATE SKIP LOCKED, so concurrent claimers,
// in this process or another, pass over each other's jobs instead of
// waiting for them and never claim one twice; they are then rewritten as
// claimed in one statement. The claim is committed when ClaimDue returns.
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
		var claims manyCols
		// The owner's lease is checked in the round trip of the first
		// search: a claim refused for it rolls back what the search
		// locked.
		var first pgx.BatchResults
		if req.Owner != "" {
			b := &pgx.Batch{}
			b.Queue(db.q.leaseExpires, req.Owner)
			b.Queue(db.q.due, string(s), nanos(req.Now), skip, req.Limit, hosts)
			first = tx.SendBatch(ctx, b)
			defer func() {
				if first != nil {
					first.Close()
				}
			}()
			alive, err := leaseAlive(first.QueryRow(), req.Now)
			if err != nil {
				return err
			}
			if !alive {
				return fmt.Errorf("%w: runner %s claims without a live lease", store.ErrLeaseLost, req.Owner)
			}
		}
		for len(out) < req.Limit && passed < 4*req.Limit {
			var rows pgx.Rows
			var err error
			if first != nil {
				rows, err = first.Query()
			} else {
				rows, err = tx.Query(ctx, db.q.due, string(s), nanos(req.Now), skip, req.Limit-len(out), hosts)
			}
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
				claims.add(c)
				out = append(out, store.ClaimOf(j))
			}
			rows.Close()
			if first != nil {
				err := first.Close()
				first = nil
				if err != nil {
					return err
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if bad == 0 || got == 0 {
				break
			}
		}
		if len(claims.id) == 0 {
			return nil
		}
		// One statement writes every claim.
		_, err := tx.Exec(ctx, db.q.updateMany, claims.args()...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// alive reports whether runner owner holds a live lease at now.
func (db *DB) alive(ctx context.Context, tx pgx.Tx, owner string, now time.Time) (bool, error) {
	return leaseAlive(tx.QueryRow(ctx, db.q.leaseExpires, owner), now)
}

// leaseAlive reads the answer of a leaseExpires query: whether the lease
// is live at now.
func leaseAlive(row pgx.Row, now time.Time) (bool, error) {
	var expires int64
	err := row.Scan(&expires)
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
	r := &finishReq{c: c, j: j, col: col, next: next, wake: make(chan bool, 1)}
	db.finishGrouped(ctx, r)
	if r.err != nil {
		return nil, nil, r.err
	}
	return j, r.nc, nil
}

// finishOne writes one finish, and its next claim, in a transaction of
// its own.
func (db *DB) finishOne(ctx context.Context, r *finishReq) {
	c, j, col, next := r.c, r.j, r.col, r.next
	var nc *store.Claim
	err := db.tx(ctx, func(tx pgx.Tx) error {
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
			return db.notHeld(ctx, tx, c, j)
		}
		if next == nil {
			return nil
		}
		var err error
		nc, err = db.claimNext(ctx, tx, *next)
		return err
	})
	r.nc, r.err = nc, err
}

// notHeld is the refusal of a finish whose claim no longer holds the job.
func (db *DB) notHeld(ctx context.Context, tx pgx.Tx, c store.Claim, j *store.Job) error {
	var exists bool
	if err := tx.QueryRow(ctx, db.q.jobExists, j.ID).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("%w: job %s", store.ErrNotFound, j.ID)
	}
	return fmt.Errorf("%w: job %s changed since claim %d (attempt %d, runner %s)", store.ErrFenced, j.ID, c.Fence, c.Attempt, c.Owner)
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

// Finishes are grouped: concurrent FinishClaim calls on one handle share
// a transaction, and with it the round trips, the search for next jobs
// and the commit. Each caller returns after the commit that holds its
// finish and its next claim, so a claim is durable before its job is
// sent, as with a transaction of its own.
const (
	// maxFinishBatch is the most finishes in one transaction.
	maxFinishBatch = 128
	// maxFinishTxs is the most grouped transactions in flight per handle:
	// while some wait for their commits, the next group forms.
	maxFinishTxs = 2
)

// finishReq is one FinishClaim on its way through a group.
type finishReq struct {
	c    store.Claim
	j    *store.Job
	col  cols
	next *store.NextClaim

	nc  *store.Claim
	err error
	// wake receives false when the request is done, true when it leads
	// batch.
	wake  chan bool
	batch []*finishReq
}

// finishGroup queues a handle's finishes for the transactions that run
// them.
type finishGroup struct {
	mu      sync.Mutex
	queue   []*finishReq
	running int
}

// finishGrouped runs r in a grouped transaction and returns when r's
// result is set. The first caller to find a free transaction leads: it
// runs the queue as one batch; a leader done with its batch hands the
// next one to a request in it, so no caller waits for more than the
// batch before its own and its own.
func (db *DB) finishGrouped(ctx context.Context, r *finishReq) {
	g := &db.finishes
	g.mu.Lock()
	g.queue = append(g.queue, r)
	if g.running < maxFinishTxs {
		g.running++
		r.batch = g.takeLocked()
		g.mu.Unlock()
		db.leadFinishes(ctx, g, r)
	} else {
		g.mu.Unlock()
	}
	for lead := range r.wake {
		if !lead {
			return
		}
		db.leadFinishes(ctx, g, r)
	}
}

// takeLocked takes up to maxFinishBatch queued requests.
func (g *finishGroup) takeLocked() []*finishReq {
	n := min(len(g.queue), maxFinishBatch)
	b := g.queue[:n:n]
	g.queue = g.queue[n:]
	if len(g.queue) == 0 {
		g.queue = nil
	}
	return b
}

// leadFinishes runs leader.batch, wakes its requests and passes the
// transaction on to the next batch, if any.
func (db *DB) leadFinishes(ctx context.Context, g *finishGroup, leader *finishReq) {
	batch := leader.batch
	leader.batch = nil
	// The batch is others' work too: the leader's cancellation must not
	// cut it short.
	db.runFinishes(context.WithoutCancel(ctx), batch)
	g.mu.Lock()
	var next []*finishReq
	if len(g.queue) > 0 {
		next = g.takeLocked()
	} else {
		g.running--
	}
	g.mu.Unlock()
	for _, r := range batch {
		r.wake <- false
	}
	if next != nil {
		next[0].batch = next
		next[0].wake <- true
	}
}

// runFinishes writes a batch of finishes and their next claims in one
// transaction. A transaction refused before its commit (a statement's
// error) is tried again finish by finish, so each gets its own outcome;
// a failed commit, or a lost server, is every finish's error, as it
// would be alone.
func (db *DB) runFinishes(ctx context.Context, batch []*finishReq) {
	if len(batch) == 1 {
		db.finishOne(ctx, batch[0])
		return
	}
	// Rows are locked in the order of their ids, so two batches never
	// wait for each other in a cycle.
	slices.SortStableFunc(batch, func(a, b *finishReq) int { return strings.Compare(a.j.ID, b.j.ID) })
	for i := 1; i < len(batch); i++ {
		if batch[i].j.ID == batch[i-1].j.ID {
			// Two finishes of one job apply in turn; one statement
			// over both would apply one of them.
			for _, r := range batch {
				db.finishOne(ctx, r)
			}
			return
		}
	}
	committing := false
	err := db.tx(ctx, func(tx pgx.Tx) error {
		committing = false
		for _, r := range batch {
			r.nc, r.err = nil, nil
		}
		if err := db.finishBatch(ctx, tx, batch); err != nil {
			return err
		}
		committing = true
		return nil
	})
	switch {
	case err == nil:
	case committing, errors.Is(err, store.ErrUnavailable):
		// A commit that failed, or a server out of reach: each finish
		// alone would fail the same way, one after another.
		for _, r := range batch {
			r.nc, r.err = nil, err
		}
	default:
		for _, r := range batch {
			db.finishOne(ctx, r)
		}
	}
}

// finishBatch writes the finishes of batch, sorted by job id, and claims
// next jobs for those held that ask, in tx. One round trip sends every
// finish, the leases of the claiming runners and the search for due
// jobs; a second one writes the claims.
func (db *DB) finishBatch(ctx context.Context, tx pgx.Tx, batch []*finishReq) error {
	b := &pgx.Batch{}
	var fin manyCols
	var owners []string
	wants := 0
	var now time.Time
	for _, r := range batch {
		c := r.c
		if !c.Fenced(c.Job) {
			fin.add(r.col)
			fin.cFence = append(fin.cFence, int64(c.Fence))
			fin.cAttempts = append(fin.cAttempts, int64(c.Attempt))
			fin.cOwner = append(fin.cOwner, c.Owner)
			fin.cState = append(fin.cState, string(c.Job.State))
			fin.cSort = append(fin.cSort, sortNanos(c.Job))
		}
		if r.next == nil {
			continue
		}
		// Due for every claimer of the batch: due at the earliest clock
		// reading among them.
		if wants == 0 || r.next.Now.Before(now) {
			now = r.next.Now
		}
		wants++
		if o := r.next.Owner; o != "" && !slices.Contains(owners, o) {
			owners = append(owners, o)
		}
	}
	if len(fin.id) > 0 {
		b.Queue(db.q.finishMany, append(fin.args(), fin.cFence, fin.cAttempts, fin.cOwner, fin.cState, fin.cSort)...)
	}
	for _, o := range owners {
		b.Queue(db.q.leaseExpires, o)
	}
	if wants > 0 {
		b.Queue(db.q.nextDueN, nanos(now), wants)
	}
	br := tx.SendBatch(ctx, b)
	heldIDs := map[string]bool{}
	if len(fin.id) > 0 {
		rows, err := br.Query()
		if err != nil {
			br.Close()
			return err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				br.Close()
				return err
			}
			heldIDs[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			br.Close()
			return err
		}
	}
	held := make([]bool, len(batch))
	for i, r := range batch {
		held[i] = !r.c.Fenced(r.c.Job) && heldIDs[r.j.ID]
	}
	expires := map[string]int64{}
	for _, o := range owners {
		var e int64
		err := br.QueryRow().Scan(&e)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			br.Close()
			return err
		}
		if err == nil {
			expires[o] = e
		}
	}
	var pend, unk []nextCand
	if wants > 0 {
		rows, err := br.Query()
		if err != nil {
			br.Close()
			return err
		}
		for rows.Next() {
			var id, s string
			var sort int64
			var rec []byte
			if err := rows.Scan(&id, &s, &sort, &rec); err != nil {
				rows.Close()
				br.Close()
				return err
			}
			j, err := decodeJob(rec)
			if err != nil || j.ID != id {
				continue // damaged: Check reports it; ClaimDue passes over it too
			}
			if c := (nextCand{store.State(s), sort, j}); c.s == store.StatePending {
				pend = append(pend, c)
			} else {
				unk = append(unk, c)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			br.Close()
			return err
		}
	}
	if err := br.Close(); err != nil {
		return err
	}
	byDue := func(a, b nextCand) int {
		if a.sort != b.sort {
			return cmp.Compare(a.sort, b.sort)
		}
		return strings.Compare(a.job.ID, b.job.ID)
	}
	slices.SortFunc(pend, byDue)
	slices.SortFunc(unk, byDue)

	// The refused finishes, then the next claims, earliest due first
	// (pending first on a tie), for the held finishes whose runner holds
	// a live lease.
	var claims manyCols
	for i, r := range batch {
		if !held[i] {
			r.err = db.notHeld(ctx, tx, r.c, r.j)
			if !errors.Is(r.err, store.ErrNotFound) && !errors.Is(r.err, store.ErrFenced) {
				return r.err // the database's error: the batch fails
			}
			continue
		}
		n := r.next
		if n == nil {
			continue
		}
		if n.Owner != "" {
			if e, ok := expires[n.Owner]; !ok || nanos(n.Now) >= e {
				continue
			}
		}
		hosts := skipList(n.SkipHosts)
		for r.nc == nil {
			pick, ok := takeNext(&pend, &unk, func(c nextCand) bool {
				h := store.ClaimHost(c.job)
				return !slices.Contains(hosts, h) && (n.Admit == nil || admitted(n.Admit, h, &hosts))
			})
			if !ok {
				break
			}
			prepare := n.Pending
			if pick.s == store.StateUnknown {
				prepare = n.Unknown
			}
			col, err := claimed(pick.job, pick.s, n.Now, n.Owner, prepare)
			if err != nil {
				continue // left to ClaimDue, which reports it
			}
			claims.add(col)
			cl := store.ClaimOf(pick.job)
			r.nc = &cl
		}
	}
	if len(claims.id) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, db.q.updateMany, claims.args()...)
	return err
}

// manyCols are the columns of several jobs as arrays, for updateMany and
// finishMany, and the claims a finishMany checks.
type manyCols struct {
	id, state         []string
	next, updated     []int64
	fence, attempts   []int64
	owner, host       []string
	job               [][]byte
	cFence, cAttempts []int64
	cOwner, cState    []string
	cSort             []int64
}

func (m *manyCols) add(c cols) {
	m.id = append(m.id, c.id)
	m.state = append(m.state, c.state)
	m.next = append(m.next, c.next)
	m.updated = append(m.updated, c.updated)
	m.fence = append(m.fence, c.fence)
	m.attempts = append(m.attempts, c.attempts)
	m.owner = append(m.owner, c.owner)
	m.job = append(m.job, c.job)
	m.host = append(m.host, c.host)
}

// args are the arguments of updateMany, and the first ones of finishMany.
func (m *manyCols) args() []any {
	return []any{m.id, m.state, m.next, m.updated, m.fence, m.attempts, m.owner, m.job, m.host}
}

// takeNext removes from pend or unk, and returns, the earliest due
// candidate that take accepts (pending first on a tie); the candidates it
// refuses stay for the group's other finishes, whose hosts may differ.
func takeNext(pend, unk *[]nextCand, take func(nextCand) bool) (nextCand, bool) {
	i, k := 0, 0
	for i < len(*pend) || k < len(*unk) {
		fromPend := k == len(*unk) || (i < len(*pend) && (*pend)[i].sort <= (*unk)[k].sort)
		list, at := unk, &k
		if fromPend {
			list, at = pend, &i
		}
		c := (*list)[*at]
		if take(c) {
			*list = slices.Delete(*list, *at, *at+1)
			return c, true
		}
		*at++
	}
	return nextCand{}, false
}

// nextCand is a due job found for a next claim.
type nextCand struct {
	s    store.State
	sort int64
	job  *store.Job
}
