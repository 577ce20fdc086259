package runner

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrun/idemrun/statusquery"
	"github.com/idemrun/idemrun/store"
)

// Store is what the runner needs from storage: the store's work contract
// (leases, claims, outcomes) and two reads for its scheduling.
type Store interface {
	store.Work
	OldestDue(s store.State) (time.Time, error)
	Stats() (map[store.State]int64, error)
	// List finds the runner's orphaned claims (adoptOrphans).
	List(f store.ListFilter) (store.ListPage, error)
}

// ErrNotAllowed marks a CheckSend refusal that will not change on a retry
// (the host is not on the allowlist, or resolves to a forbidden address):
// the attempt fails permanently, nothing sent.
var ErrNotAllowed = errors.New("runner: target not allowed")

// Runner works jobs from a Store.
type Runner struct {
	store Store
	cfg   Config
	// later, when the store has it, takes outcomes to commit after the
	// call (outcome.go); the runner then holds up to capacity jobs.
	later    store.FinishLater
	capacity int
	checker  statusquery.Checker
	custom   bool

	randMu sync.Mutex

	wake chan struct{}
	done chan struct{} // a worker finished

	// stopping is closed when Run's context ends; outcome writes that keep
	// failing give up then.
	stopping <-chan struct{}
	// tasks feeds the worker pool of the running Run.
	tasks chan task

	mu       sync.Mutex
	inflight int
	reserved int
	// acking counts the jobs of inflight whose outcome is queued and not
	// yet acknowledged (outcome_later.go).
	acking int
	// failed holds the first store.ErrFailed a write met: Run stops with it.
	failed atomic.Pointer[error]
	// renewedAt is the clock reading (unix nanoseconds) the lease was
	// last registered or renewed at (leaseFresh).
	renewedAt atomic.Int64
	// stale is set while claims are paused for a stale lease (for the log).
	stale atomic.Bool
	// held are the jobs this runner's workers work (under mu); orphans is
	// set when a claim's commit outcome was unknown; claimGate keeps
	// claims and the adoption of orphans apart (orphans.go).
	held      map[string]struct{}
	orphans   atomic.Bool
	claimGate sync.RWMutex

	// ends counts the jobs ended since the last summary; started counts
	// the jobs handed to workers, and waitNoted is its value when the
	// last idle wait was logged (joblog.go).
	ends      endCounts
	started   atomic.Int64
	waitNoted atomic.Int64
	// traffic says which hosts a claim passes over and admits each job.
	traffic *traffic
}

// noteFailed records err when it stops the runner (store.ErrFailed: no
// write will land; store.ErrLeaseLost: its jobs are another runner's to
// rescue) and reports whether it does.
func (r *Runner) noteFailed(err error) bool {
	if !errors.Is(err, store.ErrFailed) && !errors.Is(err, store.ErrLeaseLost) {
		return false
	}
	r.failed.CompareAndSwap(nil, &err)
	return true
}

// New returns a Runner over s.
func New(s Store, cfg Config) *Runner {
	if clk, ok := s.(store.Clock); ok && cfg.Now == nil {
		cfg.Now = clk.Now
	}
	cfg.setDefaults()
	r := &Runner{
		store: s,
		cfg:   cfg,
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}, 1),
		held:  map[string]struct{}{},
	}
	r.waitNoted.Store(-1)
	r.capacity = cfg.Workers
	tc := cfg.trafficConfig()
	if fl, ok := s.(store.FinishLater); ok {
		r.later = fl
		r.capacity += cfg.ClaimAhead
		// A host's slots count the jobs held for it, claimed ahead or
		// sending: a host alone may fill the runner's capacity.
		tc.workers = r.capacity
	}
	r.traffic = newTraffic(tc, s, cfg.Now, cfg.Logger)
	if cfg.Checker != nil {
		r.checker, r.custom = cfg.Checker, true
	} else if cfg.HTTPChecker != nil {
		if cfg.HTTPChecker.Doer == nil && cfg.HTTPChecker.DialControl == nil {
			cfg.HTTPChecker.DialControl = cfg.DialControl
		}
		if cfg.HTTPChecker.Doer == nil && cfg.HTTPChecker.TLSConfig == nil && cfg.TLSConfig != nil {
			// A copy taken now, as the Doer's is: a change the caller
			// makes to its config's fields later reaches neither (the
			// RootCAs pool and Certificates are shared, as Clone does).
			cfg.HTTPChecker.TLSConfig = cfg.TLSConfig.Clone()
		}
		r.checker = cfg.HTTPChecker
	} else {
		var tc *tls.Config
		if cfg.TLSConfig != nil {
			tc = cfg.TLSConfig.Clone()
		}
		r.checker = &statusquery.HTTPChecker{DialControl: cfg.DialControl, TLSConfig: tc}
	}
	return r
}

// Notify wakes the scheduler, e.g. after an enqueue, so due work does not
// wait for the next poll.
func (r *Runner) Notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Runner) jitter(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	r.randMu.Lock()
	defer r.randMu.Unlock()
	return time.Duration(r.cfg.Rand.Int64N(int64(max) + 1))
}

func (r *Runner) backoff(b Backoff, n int) time.Duration {
	r.randMu.Lock()
	defer r.randMu.Unlock()
	return b.Delay(n, r.cfg.Rand)
}

// Run recovers, then claims and works due jobs until ctx is canceled (then it
// stops claiming, lets in-flight work finish for ShutdownGrace, cancels the
// rest, records them and returns nil) or, with UntilIdle, until no job is
// pending, running or unknown.
//
// When its lease is lost (the store unreachable for longer than
// LeaseTTL), Run ends its attempts in flight as a shutdown does and
// returns an error wrapping store.ErrLeaseLost: its jobs are another
// runner's to rescue, and a new Runner (a new Config.ID, or none) goes
// on, as `idemrun run` does.
func (r *Runner) Run(ctx context.Context) error {
	r.stopping = ctx.Done()
	stopLease, err := r.register(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("runner: lease: %w", err)
	}
	defer stopLease()
	if w, ok := r.store.(store.Wakeups); ok {
		// Other processes' enqueues wake this runner as its own do.
		wctx, endWakeups := context.WithCancel(ctx)
		defer endWakeups()
		go func(ch <-chan struct{}) {
			for range ch {
				r.Notify()
			}
		}(w.Wakeups(wctx))
	}
	if _, err := r.Recover(ctx); err != nil {
		if ctx.Err() != nil {
			// Stopped before recovery ended: nothing was claimed, and
			// recovery runs again at the next start.
			return nil
		}
		if r.noteFailed(err) {
			return fmt.Errorf("runner: recovery: %w", err)
		}
		// A store that did not answer (a database restarting): every
		// heartbeat rescues again, and claims take no running job.
		r.cfg.Logger.Error("recovery of expired runners' jobs failed; will try again at the next heartbeat", "err", err)
	}
	sumCtx, endSummary := context.WithCancel(ctx)
	defer endSummary()
	go r.summarize(sumCtx)
	// Attempts get their own context: canceled only after the grace period.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup // jobs being worked
	defer wg.Wait()
	// A fixed pool of worker goroutines: their stacks grow once, not once
	// per job. Jobs claimed ahead wait in the queue for a free worker.
	tasks := make(chan task, r.capacity)
	var pool sync.WaitGroup
	for range r.cfg.Workers {
		pool.Add(1)
		go func() {
			defer pool.Done()
			for t := range tasks {
				r.runTask(t)
			}
		}()
	}
	r.tasks = tasks
	defer func() {
		// Every exit path first waits for claim rounds and jobs, so no
		// task is queued or sent after this.
		close(tasks)
		pool.Wait()
	}()

	start := time.Now()
	rounds := make(chan roundResult, r.cfg.ClaimRounds)
	inRounds := 0
	short := false // the last round found less due work than it asked for
	for {
		if f := r.failed.Load(); f != nil {
			// Nothing more can be claimed or recorded: the jobs in
			// flight end as a shutdown ends them, and Run reports why.
			for ; inRounds > 0; inRounds-- {
				<-rounds
			}
			_ = r.shutdown(&wg, cancelWork)
			return fmt.Errorf("runner: stopped: %w", *f)
		}
		if ctx.Err() != nil {
			for ; inRounds > 0; inRounds-- {
				<-rounds
			}
			return r.shutdown(&wg, cancelWork)
		}
		// Collect finished claim rounds without blocking.
	collect:
		for inRounds > 0 {
			select {
			case res := <-rounds:
				inRounds--
				short = r.roundDone(ctx, res)
			default:
				break collect
			}
		}
		free := r.capacity - r.claimLoad()
		if el := time.Since(start); el < r.cfg.StartupSpread {
			ramp := max(1, int(int64(r.capacity)*int64(el)/int64(r.cfg.StartupSpread)))
			free = min(free, ramp-r.claimLoad())
		}
		// Claim rounds overlap: each round waits for its commit, and while
		// it does, the next one claims the slots freed meanwhile. Rounds
		// skip each other's candidates, so they do not collide.
		if free > 0 && inRounds < r.cfg.ClaimRounds && !short && (inRounds == 0 || free >= r.minRound()) {
			// Small rounds keep the first jobs of a round from waiting on
			// the decoding of the last ones.
			free = min(free, r.roundSize())
			r.reserve(free)
			inRounds++
			go func(n int) {
				got, err := r.claimAndStart(ctx, workCtx, &wg, n)
				r.unreserve(n)
				rounds <- roundResult{short: got < n, err: err}
			}(free)
			short = false
			continue
		}
		if inRounds > 0 {
			// Wait for a round or a worker.
			select {
			case res := <-rounds:
				inRounds--
				short = r.roundDone(ctx, res)
			case <-r.done:
			case <-ctx.Done():
			}
			continue
		}
		if r.cfg.UntilIdle && r.load() == 0 {
			st, err := r.idleStats()
			if err != nil {
				return err
			}
			if st[store.StatePending]+st[store.StateRunning]+st[store.StateUnknown] == 0 {
				return nil
			}
			r.noteIdleWait(ctx, st)
		}
		if short || free <= 0 {
			r.wait(ctx, free > 0)
			short = false
		}
	}
}

// roundSize is the most jobs a claim round asks for: ClaimBatch, or with
// jobs claimed ahead, where every claim is a round's (none is chained to
// an outcome) and the jobs wait in the queue anyway, a quarter of the
// capacity if more, so ClaimRounds rounds in flight can hold all of it.
func (r *Runner) roundSize() int {
	if r.later == nil {
		return r.cfg.ClaimBatch
	}
	return max(r.cfg.ClaimBatch, r.capacity/4)
}

// minRound is the fewest jobs a claim round asks for while another is
// under way: with jobs claimed ahead, slots come back one by one, and a
// round per slot would cost a commit per job. The synchronous path's
// slots mostly come back chained to an outcome, so any number goes.
func (r *Runner) minRound() int {
	if r.later == nil {
		return 1
	}
	return min(r.roundSize(), max(1, r.capacity/8))
}

type roundResult struct {
	short bool
	err   error
}

// roundDone logs a failed claim round (and backs off a poll interval) and
// reports whether the round found less due work than it asked for.
func (r *Runner) roundDone(ctx context.Context, res roundResult) bool {
	if r.noteFailed(res.err) {
		return res.short // Run stops at the top of its loop
	}
	if res.err != nil && ctx.Err() == nil {
		r.cfg.Logger.Error("claim failed", "err", res.err)
		sleepCtx(ctx, r.cfg.PollInterval)
	}
	return res.short
}

func (r *Runner) reserve(n int) {
	r.mu.Lock()
	r.reserved += n
	r.mu.Unlock()
}

func (r *Runner) unreserve(n int) {
	r.mu.Lock()
	r.reserved -= n
	r.mu.Unlock()
}

// load is the slots taken: jobs held (being worked, claimed ahead, or
// waiting for their outcome's commit) plus slots reserved by claim rounds
// in flight.
// claimLoad is the slots a claim round counts: the jobs not yet sent or
// being sent, plus slots reserved. Jobs sent and waiting for their
// outcome's commit take none, unless as many wait as the capacity: then
// every slot, until commits catch up.
func (r *Runner) claimLoad() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.acking >= r.capacity {
		return r.capacity
	}
	return r.inflight - r.acking + r.reserved
}

func (r *Runner) load() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inflight + r.reserved
}

// idleStats is the store's count of jobs by state, for UntilIdle.
func (r *Runner) idleStats() (map[store.State]int64, error) {
	st, err := r.store.Stats()
	if err != nil {
		return nil, fmt.Errorf("runner: stats: %w", err)
	}
	return st, nil
}

// wait sleeps until the next due time, a wake-up, a finished worker, or
// the poll interval.
func (r *Runner) wait(ctx context.Context, haveSlots bool) {
	d := r.cfg.PollInterval
	if haveSlots {
		now := r.cfg.Now()
		for _, s := range []store.State{store.StatePending, store.StateUnknown} {
			if t, err := r.store.OldestDue(s); err == nil && !t.IsZero() {
				if until := t.Sub(now); until < d {
					d = max(until, time.Millisecond)
				}
			}
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-r.wake:
	case <-r.done:
	case <-t.C:
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// claimAndStart claims up to free due jobs, pending first, and starts a
// worker for each.
func (r *Runner) claimAndStart(ctx, workCtx context.Context, wg *sync.WaitGroup, free int) (int, error) {
	plan := r.claimPlan()
	now := plan.Now
	if !r.leaseFresh(now) {
		if !r.stale.Swap(true) {
			r.cfg.Logger.Warn("runner lease not renewed; claiming paused until a heartbeat lands", "runner", r.cfg.ID)
		}
		return 0, nil // the next renewal wakes the scheduler
	}
	started := 0
	r.claimGate.RLock()
	defer r.claimGate.RUnlock()
	adm := r.traffic.round()
	pend, err := r.store.ClaimDue(ctx, store.ClaimRequest{State: store.StatePending, Now: now, Limit: free, Owner: plan.Owner, Prepare: plan.Pending,
		SkipHosts: r.traffic.skipHosts(now), Admit: adm.admit})
	hosts := adm.settle(claimPtrs(pend)...)
	if err != nil {
		r.noteClaimErr(err)
		return 0, err
	}
	for i, c := range pend {
		r.start(workCtx, wg, c, hosts[i], r.attempt)
		started++
	}
	if free -= len(pend); free <= 0 {
		return started, nil
	}
	adm = r.traffic.queryRound()
	unk, err := r.store.ClaimDue(ctx, store.ClaimRequest{State: store.StateUnknown, Now: now, Limit: free, Owner: plan.Owner, Prepare: plan.Unknown,
		SkipHosts: r.traffic.skipQueries(now), Admit: adm.admit})
	hosts = adm.settle(claimPtrs(unk)...)
	if err != nil {
		r.noteClaimErr(err)
		return started, err
	}
	for i, c := range unk {
		r.start(workCtx, wg, c, hosts[i], r.resolveUnknown)
		started++
	}
	return started, nil
}

// queryTimeout bounds one status query: the HTTP checker's own timeout, or
// Config.QueryTimeout for a custom checker.
func (r *Runner) queryTimeout() time.Duration {
	if hc, ok := r.checker.(*statusquery.HTTPChecker); ok && hc.Timeout > 0 {
		return hc.Timeout
	}
	return r.cfg.QueryTimeout
}

// claimPtrs points at each claim of cs.
func claimPtrs(cs []store.Claim) []*store.Claim {
	out := make([]*store.Claim, len(cs))
	for i := range cs {
		out[i] = &cs[i]
	}
	return out
}

// task is one claimed job for the worker pool.
type task struct {
	ctx  context.Context
	wg   *sync.WaitGroup
	c    store.Claim
	host string // its claim host, whose slot the task holds
	work workFunc
}

// workFunc works one claimed job. Its outcome write may claim the worker's
// next job (slot.next).
type workFunc func(context.Context, *slot, store.Claim)

// slot is one worker's hold on a job slot while it works a task.
type slot struct {
	// next is the job the last outcome write claimed in the same commit;
	// the worker works it without giving its slot back.
	next *store.Claim
	// host is the claim host of the job worked, nextHost next's.
	host, nextHost string
	// freed is set once the job's send ended and its host slot is back.
	freed bool
	// wg counts the job until it ends; queued is set once its outcome is
	// queued to be committed later, whose acknowledgement ends it.
	wg     *sync.WaitGroup
	queued bool
}

// jobDone ends a job of the runner's: it no longer takes a slot, and Run
// no longer waits for it.
func (r *Runner) jobDone(wg *sync.WaitGroup) {
	r.mu.Lock()
	r.inflight--
	r.mu.Unlock()
	select {
	case r.done <- struct{}{}:
	default:
	}
	wg.Done()
}

// sent gives back the host slot of the job s works, once: its send is
// over, so the outcome write may claim the next job of that host.
func (r *Runner) sent(s *slot) {
	if !s.freed {
		s.freed = true
		r.traffic.end(s.host)
		r.traffic.release(s.host)
	}
}

// start hands a claimed job to the worker pool. It never blocks: the pool's
// queue holds capacity tasks and no more than capacity jobs are held.
func (r *Runner) start(ctx context.Context, wg *sync.WaitGroup, c store.Claim, host string, work workFunc) {
	r.mu.Lock()
	r.inflight++
	r.held[c.Job.ID] = struct{}{}
	r.mu.Unlock()
	r.started.Add(1)
	wg.Add(1)
	r.tasks <- task{ctx: ctx, wg: wg, c: c, host: host, work: work}
}

func (r *Runner) runTask(t task) {
	s := &slot{host: t.host, wg: t.wg}
	c, work := t.c, t.work
	for {
		r.traffic.begin(s.host)
		work(r.taskContext(t.ctx), s, c)
		r.sent(s)
		if s.queued {
			return // the outcome's acknowledgement ends the job
		}
		r.release(c.Job.ID)
		if s.next == nil {
			r.jobDone(t.wg)
			return
		}
		c, s.next, s.host, s.freed = *s.next, nil, s.nextHost, false
		r.started.Add(1)
		work = r.attempt
		if c.Job.State == store.StateUnknown {
			work = r.resolveUnknown
		}
	}
}

// taskContext is the context a worker works its next job in: ctx, or,
// once Run is stopping with jobs claimed ahead, one already canceled, so
// a job claimed ahead and not yet started ends as an attempt canceled
// before it was sent (not counted against its budget) instead of holding
// the shutdown up.
func (r *Runner) taskContext(ctx context.Context) context.Context {
	if r.later == nil {
		return ctx
	}
	select {
	case <-r.stopping:
		stopped, cancel := context.WithCancel(ctx)
		cancel()
		return stopped
	default:
		return ctx
	}
}

// mayChain reports whether a worker's outcome write may claim its next job:
// not once Run is stopping, nor once the runner must stop (its lease lost,
// its store failed), nor while its lease goes unrenewed. (During the
// startup ramp it may: a chained worker keeps its slot, so the number of
// jobs in flight stays within the ramp.)
func (r *Runner) mayChain() bool {
	if r.failed.Load() != nil || !r.leaseFresh(r.cfg.Now()) {
		return false
	}
	select {
	case <-r.stopping:
		return false
	default:
		return true
	}
}

// claimPlan is what a claim does at this moment, in a claim round
// (claimAndStart) or chained to an outcome write: a claimed pending job
// records the start of its attempt; a claimed unknown job is leased, its
// next_run_at moved past the longest a query can take, so a crash
// mid-query only delays the next one. A chained claim takes pending and
// unknown jobs by next_run_at alone, a round pending ones first.
func (r *Runner) claimPlan() *store.NextClaim {
	now := r.cfg.Now()
	lease := r.queryTimeout() + r.cfg.QuietPeriod
	return &store.NextClaim{
		Now:   now,
		Owner: r.cfg.ID,
		Pending: func(j *store.Job) {
			j.AddEvent(store.Event{Kind: store.EventAttempt, N: j.Attempts, Start: now})
		},
		Unknown: func(j *store.Job) {
			j.NextRunAt = now.Add(lease)
		},
	}
}

// shutdown waits up to ShutdownGrace for in-flight work, then cancels it;
// workers record a canceled attempt as unknown before they return.
func (r *Runner) shutdown(wg *sync.WaitGroup, cancelWork context.CancelFunc) error {
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	t := time.NewTimer(r.cfg.ShutdownGrace)
	defer t.Stop()
	select {
	case <-finished:
	case <-t.C:
		r.cfg.Logger.Warn("shutdown grace over; canceling in-flight attempts", "in_flight", r.load())
		cancelWork()
		<-finished
	}
	return nil
}

// write is FinishClaim plus logging and the test hook: it writes the
// outcome of c and, unless Run is stopping, claims the worker's next job
// into s.next in the same commit. A fenced write means a newer claim owns
// the job; it is logged and dropped. With a store that commits outcomes
// later, the outcome is queued instead (writeLater) and nothing chained.
func (r *Runner) write(s *slot, c store.Claim, fn store.TransitionFunc) {
	if r.later != nil && s != nil {
		r.writeLater(s, c, fn)
		return
	}
	// Outcome writes must land even during shutdown, so they do not use the
	// run context. A failed write is tried again with backoff until the
	// runner stops; then the job stays as claimed (running stays running)
	// and recovery turns it unknown on the next start.
	var plan *store.NextClaim
	var adm *admissions
	if r.mayChain() {
		r.claimGate.RLock()
		plan = r.claimPlan()
		adm = r.traffic.round()
		plan.SkipHosts, plan.Admit = r.traffic.skipHosts(plan.Now), adm.admit
	}
	j, next, err := r.store.FinishClaim(context.Background(), c, fn, plan)
	// The first try also claims the worker's next job in the same
	// commit; retries after a failure only write the outcome.
	if plan != nil {
		s.nextHost = adm.settle(next)[0]
		if next != nil {
			r.hold(next.Job.ID)
		}
		r.noteClaimErr(err)
		r.claimGate.RUnlock()
	}
	if err == nil {
		s.next = next
		r.written(c.Job, j)
		return
	}
	r.writeAgain(c, fn, err)
}

// writeAgain handles err, the failure of the first write of c's outcome:
// a failed write is tried again with backoff until it lands, is refused,
// or the runner stops (then the job stays as claimed, running stays
// running, and recovery turns it unknown on the next start).
func (r *Runner) writeAgain(c store.Claim, fn store.TransitionFunc, err error) {
	wait := 50 * time.Millisecond
	unconfirmed := false // an earlier try's commit was not confirmed
	for {
		if errors.Is(err, store.ErrFenced) {
			if unconfirmed {
				r.cfg.Logger.Info("outcome refused by the fence after a try whose commit was not confirmed: that try landed, or the job was rescued since", "job", c.Job.ID)
				return
			}
			r.cfg.Logger.Warn("stale claim dropped", "job", c.Job.ID, "fence", c.Fence)
			return
		}
		unconfirmed = unconfirmed || errors.Is(err, store.ErrCommitUnknown)
		var te *store.TransitionError
		if errors.As(err, &te) {
			r.cfg.Logger.Error("outcome refused by the state machine", "job", c.Job.ID, "err", err)
			return
		}
		if r.noteFailed(err) {
			// No write will land again: the job stays as claimed, for
			// recovery at the next start, and Run stops when this worker
			// is done.
			r.cfg.Logger.Error("writing outcome failed; the store takes no more writes, job left running for recovery", "job", c.Job.ID, "err", err)
			return
		}
		if r.failed.Load() != nil {
			// The runner is stopping on its own (a lost lease, a failed
			// store): its Run waits for this worker, so it gives up now;
			// the job is recovered as its lease dictates.
			r.cfg.Logger.Error("writing outcome failed while the runner stops; job left for recovery", "job", c.Job.ID, "err", err)
			return
		}
		r.cfg.Logger.Error("writing outcome failed; will try again", "job", c.Job.ID, "err", err, "in", wait)
		select {
		case <-r.stopping:
			r.cfg.Logger.Error("runner stopping; job left running for recovery at the next start", "job", c.Job.ID)
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
		var j *store.Job
		j, _, err = r.store.FinishClaim(context.Background(), c, fn, nil)
		if err == nil {
			r.written(c.Job, j)
			return
		}
	}
}

// written reports a landed outcome write from before to after: the job's
// end in the log, and the OnWrite and OnEvent hooks.
func (r *Runner) written(before, after *store.Job) {
	r.logEnd(before, after)
	if r.cfg.OnEvent != nil {
		if e, ok := eventDone(before, after); ok {
			r.cfg.OnEvent(after, e)
		}
	}
	if r.cfg.OnWrite != nil {
		r.cfg.OnWrite(after)
	}
}

// eventDone returns the last history event of after when the write from
// before to after added or closed it; a write that only parked or
// rescheduled the job (its delay noted on the last event) did neither.
func eventDone(before, after *store.Job) (store.Event, bool) {
	if after == nil || len(after.History) == 0 {
		return store.Event{}, false
	}
	a := after.History[len(after.History)-1]
	if before != nil && len(before.History) > 0 {
		b := before.History[len(before.History)-1]
		if a.Kind == b.Kind && a.N == b.N && a.Start.Equal(b.Start) && a.End.Equal(b.End) && a.Class == b.Class && a.Outcome == b.Outcome {
			return store.Event{}, false
		}
	}
	return a, true
}
