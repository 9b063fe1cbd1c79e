// Package worker is a small worker library for wfengine (pgx v4).
//
//	w := &worker.Worker{ConnString: "dbname=shop", Queues: []string{"payments"},
//		Handlers: map[string]worker.Handler{"charge_card": charge}}
//	err := w.Run(context.Background()) // until SIGTERM / SIGINT or ctx is done
//
// Connections (each statement its own transaction): one claim connection
// (waiting claims: wf.claim_tasks for one queue, wf.claim_tasks_any for
// several when the server has it, else a claim per queue and LISTEN on
// their channels), one heartbeat connection (one statement renews every
// lease in flight), and a pool of Concurrency connections for reports
// (with eager dispatch, the default where the server has it,
// wf.complete_and_claim / wf.fail_and_claim: a report that leases the next
// task of the same queue runs it at once in the same slot; NoEager turns it
// off).  Concurrency is goroutines.
//
// Shards: set Shards to the connection strings of a sharded deployment's
// shards instead of ConnString.  The worker uses one shard at a time for all
// its connections; when a call is refused with 55W01 (the shard map gives
// the worker's tenant to another shard), or a connection cannot be made or
// is lost, it moves all its connections to the next shard (round robin)
// and makes the call again there.  A report there of a task leased on the
// old shard is answered stale and the task dropped; the worker claims on.
//
// Graceful shutdown: SIGTERM, SIGINT or the end of Run's context cancels
// the waiting claim (a cancel request, delivered before Run goes on; the
// cancelled claim rolls back and leased nothing), claims nothing more, and lets the tasks in
// flight finish and report, heartbeaten, for up to DrainTimeout.  wfengine
// has no call that hands a lease back: a task still running after that is
// left to its lease, which expires, and the engine delivers the attempt
// again; its context is cancelled.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

// Answer is the verdict on a report or heartbeat (docs/reference.md).
type Answer string

const (
	Accepted        Answer = "accepted"
	Duplicate       Answer = "duplicate"
	Stale           Answer = "stale"
	CancelRequested Answer = "cancel_requested"
	OK              Answer = "ok" // a heartbeat that renewed the lease
)

// WfError is an error of the server: SQLSTATE, message, detail, hint.
type WfError struct {
	SQLState, Message, Detail, Hint string
}

func (e *WfError) Error() string {
	s := e.SQLState + ": " + e.Message
	if e.Hint != "" {
		s += " (hint: " + e.Hint + ")"
	}
	return s
}

// Retryable reports whether the call changed nothing and may be made
// again: a serialization failure or deadlock, a lock not available, a
// partition moving between shards (40001 through the router, 55W01 on a
// shard), a shard that cannot be reached (class 08) or shutting down (57P01).
func (e *WfError) Retryable() bool {
	switch e.SQLState {
	case "40001", "40P01", "55P03", "55W01", "57P01":
		return true
	}
	return strings.HasPrefix(e.SQLState, "08")
}

// wrap turns a server error into a *WfError; other errors pass.
func wrap(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return &WfError{SQLState: pe.Code, Message: pe.Message, Detail: pe.Detail, Hint: pe.Hint}
	}
	return err
}

// TaskFailure, returned by a handler, fails the attempt with an error code.
// It is retryable unless it says otherwise: the zero value lets the step's
// retry policy try again; NonRetryable makes the failure final (retrying
// cannot help).
type TaskFailure struct {
	Code, Message string
	NonRetryable  bool
	Details       map[string]interface{}
}

func (f *TaskFailure) Error() string { return f.Code + ": " + f.Message }

// Task is one leased attempt, as wf.claim_tasks returns it.
type Task struct {
	TaskID         int64
	RunID          string
	Step           string
	Attempt        int32
	Fence          int64
	IdempotencyKey string
	Input          json.RawMessage
	LeaseExpiresAt time.Time
	Queue          string
	Activity       *string
	Deliveries     int32

	cancel    context.CancelFunc
	abandoned bool // the drain ended with it running: left to its lease
}

// Handler does the work of a task and returns its output (marshalled to
// JSON), or an error: a *TaskFailure, or any other error (or a panic), which
// fails the attempt as retryable with code "exception".  ctx is cancelled when a
// heartbeat answers stale or cancel_requested, or at the end of the drain.
type Handler func(ctx context.Context, t *Task) (interface{}, error)

// Querier is a pgx connection or pool.
type Querier interface {
	Query(ctx context.Context, sql string, args ...interface{}) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...interface{}) pgx.Row
}

const columns = "task_id, run_id::text, step, attempt, fence, idempotency_key, input," +
	" lease_expires_at, queue, activity, deliveries"

// secs is d as an interval literal (microseconds, as the server keeps it).
func secs(d time.Duration) string { return fmt.Sprintf("%d microseconds", d.Microseconds()) }

func scanTasks(rows pgx.Rows, err error) ([]*Task, error) {
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []*Task
	for rows.Next() {
		t := &Task{}
		var input []byte
		if err := rows.Scan(&t.TaskID, &t.RunID, &t.Step, &t.Attempt, &t.Fence, &t.IdempotencyKey,
			&input, &t.LeaseExpiresAt, &t.Queue, &t.Activity, &t.Deliveries); err != nil {
			return nil, wrap(err)
		}
		t.Input = input
		out = append(out, t)
	}
	return out, wrap(rows.Err())
}

// Claim leases up to maxTasks attempts of queue (wait 0: do not wait).
func Claim(ctx context.Context, q Querier, queue, worker string, maxTasks int, lease, wait time.Duration) ([]*Task, error) {
	var w *string
	if wait > 0 {
		s := secs(wait)
		w = &s
	}
	return scanTasks(q.Query(ctx, "SELECT "+columns+
		" FROM wf.claim_tasks($1, $2, $3::integer, $4::interval, $5::interval)",
		queue, worker, maxTasks, secs(lease), w))
}

// ClaimAny leases up to maxTasks attempts of any of queues (wfengine 0.2.0).
func ClaimAny(ctx context.Context, q Querier, queues []string, worker string, maxTasks int, lease, wait time.Duration) ([]*Task, error) {
	var w *string
	if wait > 0 {
		s := secs(wait)
		w = &s
	}
	return scanTasks(q.Query(ctx, "SELECT "+columns+
		" FROM wf.claim_tasks_any($1::text[], $2, $3::integer, $4::interval, $5::interval)",
		queues, worker, maxTasks, secs(lease), w))
}

func answer(row pgx.Row) (Answer, error) {
	var a string
	if err := row.Scan(&a); err != nil {
		return "", wrap(err)
	}
	return Answer(a), nil
}

// Complete reports that the attempt succeeded with output (JSON-marshalled).
func Complete(ctx context.Context, q Querier, taskID, fence int64, output interface{}) (Answer, error) {
	if output == nil {
		output = map[string]interface{}{}
	}
	b, err := json.Marshal(output)
	if err != nil {
		return "", err
	}
	return answer(q.QueryRow(ctx, "SELECT wf.complete_task($1, $2, $3::text::jsonb)", taskID, fence, string(b)))
}

// Fail reports that the attempt failed with error (JSON-marshalled).
func Fail(ctx context.Context, q Querier, taskID, fence int64, error interface{}, retryable bool) (Answer, error) {
	b, err := json.Marshal(error)
	if err != nil {
		return "", err
	}
	return answer(q.QueryRow(ctx, "SELECT wf.fail_task($1, $2, $3::text::jsonb, $4)", taskID, fence, string(b), retryable))
}

// scanLeads reads the rows of wf.complete_and_claim and wf.fail_and_claim:
// the verdict, then the columns of a lease (all NULL in the one row of a
// report that leased nothing).
func scanLeads(rows pgx.Rows, err error) (Answer, []*Task, error) {
	if err != nil {
		return "", nil, wrap(err)
	}
	defer rows.Close()
	var a Answer
	var out []*Task
	for rows.Next() {
		var (
			ans                     string
			id, fence               *int64
			runID, step, key, queue *string
			attempt, deliveries     *int32
			input                   []byte
			expires                 *time.Time
			activity                *string
		)
		if err := rows.Scan(&ans, &id, &runID, &step, &attempt, &fence, &key, &input, &expires,
			&queue, &activity, &deliveries); err != nil {
			return "", nil, wrap(err)
		}
		a = Answer(ans)
		if id == nil {
			continue
		}
		out = append(out, &Task{TaskID: *id, RunID: *runID, Step: *step, Attempt: *attempt,
			Fence: *fence, IdempotencyKey: *key, Input: input, LeaseExpiresAt: *expires,
			Queue: *queue, Activity: activity, Deliveries: *deliveries})
	}
	return a, out, wrap(rows.Err())
}

// CompleteAndClaim reports that the attempt succeeded with output, then
// leases up to maxTasks attempts of queue (the next step of the same run
// first), in one call and one commit (eager dispatch, wfengine 0.2.0).
func CompleteAndClaim(ctx context.Context, q Querier, taskID, fence int64, output interface{},
	queue, worker string, maxTasks int, lease time.Duration) (Answer, []*Task, error) {
	if output == nil {
		output = map[string]interface{}{}
	}
	b, err := json.Marshal(output)
	if err != nil {
		return "", nil, err
	}
	return scanLeads(q.Query(ctx, "SELECT answer, "+columns+" FROM wf.complete_and_claim($1, $2,"+
		" $3::text::jsonb, $4, $5, $6::integer, $7::interval)",
		taskID, fence, string(b), queue, worker, maxTasks, secs(lease)))
}

// FailAndClaim reports that the attempt failed with error, then leases up
// to maxTasks attempts of queue, in one call and one commit.
func FailAndClaim(ctx context.Context, q Querier, taskID, fence int64, error interface{}, retryable bool,
	queue, worker string, maxTasks int, lease time.Duration) (Answer, []*Task, error) {
	b, err := json.Marshal(error)
	if err != nil {
		return "", nil, err
	}
	return scanLeads(q.Query(ctx, "SELECT answer, "+columns+" FROM wf.fail_and_claim($1, $2,"+
		" $3::text::jsonb, $4, $5, $6, $7::integer, $8::interval)",
		taskID, fence, string(b), retryable, queue, worker, maxTasks, secs(lease)))
}

// Heartbeat renews the lease of an attempt.
func Heartbeat(ctx context.Context, q Querier, taskID, fence int64) (Answer, error) {
	return answer(q.QueryRow(ctx, "SELECT wf.heartbeat($1, $2)", taskID, fence))
}

// Worker is a worker loop; set the fields, then call Run.  The options
// and their defaults are those of every wfengine worker library
// (docs/workers.md).  Durations are time.Duration: write 30 * time.Second;
// Run refuses a duration above zero but below a millisecond (an untyped
// Lease: 30 would be 30 ns).
type Worker struct {
	ConnString   string             // libpq connection string ("": the environment)
	Shards       []string           // the shards' connection strings, used instead of ConnString when set
	Queues       []string           //
	Handlers     map[string]Handler // by activity (by queue for a step without one)
	Handler      Handler            // the catch-all, for a task no entry of Handlers matches
	Name         string             // default host-pid
	Concurrency  int                // default 4
	Lease        time.Duration      // default 30 s
	Wait         time.Duration      // how long a claim waits, default 10 s
	Heartbeat    time.Duration      // between heartbeats, default Lease/3
	DrainTimeout time.Duration      // default Lease
	Logger       *log.Logger        // default log.Default()
	// NoEager: report with wf.complete_task / wf.fail_task even where the
	// server has eager dispatch.  Eager dispatch is on by default (as in
	// every library); the field is its negation so that the zero value
	// keeps the default.
	NoEager bool

	mu          sync.Mutex
	inFlight    map[int64]*Task
	Answers     []Answer // of every report ("" for a report that failed)
	MaxInFlight int
	HandedOn    int // tasks leased by a report (eager dispatch)
	Moves       int // moves to another shard
	generation  int // one more at each move to another shard (under mu)

	cmu sync.Mutex  // guards cur
	cur *shardConns // the connections of the shard in use
}

// shardConns are the claim connection and report pool of one shard, made
// under one generation.
type shardConns struct {
	generation int
	connString string
	claim      *pgx.Conn
	pool       *pgxpool.Pool
	hasAny     bool
	eager      bool
}

func (c *shardConns) close() {
	c.claim.Close(context.Background())
	c.pool.Close()
}

func (w *Worker) shards() []string {
	if len(w.Shards) > 0 {
		return w.Shards
	}
	return []string{w.ConnString}
}

// Shard returns the connection string of the shard in use.
func (w *Worker) Shard() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	sh := w.shards()
	return sh[w.generation%len(sh)]
}

func (w *Worker) gen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.generation
}

// callsForMove reports whether err moves a worker with a shard list to
// the next shard: a call refused with 55W01, or a connection not made or
// lost.
func (w *Worker) callsForMove(err error) bool {
	if len(w.shards()) < 2 || err == nil || errors.Is(err, context.Canceled) {
		return false // one connection string: as ever
	}
	var we *WfError
	if !errors.As(err, &we) {
		return true // not the server's: the connection
	}
	return we.SQLState == "55W01" || we.SQLState == "57P01" || strings.HasPrefix(we.SQLState, "08")
}

// move moves to the next shard, unless another goroutine already moved on
// from generation (one move per failure, however many see it).
func (w *Worker) move(generation int, why error) {
	w.mu.Lock()
	if generation != w.generation {
		w.mu.Unlock()
		return
	}
	sh := w.shards()
	old := sh[w.generation%len(sh)]
	w.generation++
	w.Moves++
	next := sh[w.generation%len(sh)]
	w.mu.Unlock()
	w.Logger.Printf("wfengine worker: moving from shard %q to %q (%v)", old, next, why)
}

// current returns the connections of the shard in use, made anew (and the
// old ones closed) after a move.
func (w *Worker) current() (*shardConns, error) {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	w.mu.Lock()
	generation := w.generation
	w.mu.Unlock()
	if w.cur != nil && w.cur.generation == generation {
		return w.cur, nil
	}
	if w.cur != nil {
		go w.cur.close() // a report in flight there ends first
		w.cur = nil
	}
	sh := w.shards()
	c, err := w.open(sh[generation%len(sh)])
	if err != nil {
		return nil, err
	}
	c.generation = generation
	w.cur = c
	return c, nil
}

// open connects to a shard: the claim connection and the report pool.
func (w *Worker) open(connString string) (*shardConns, error) {
	bg := context.Background()
	claimConn, err := pgx.Connect(bg, connString)
	if err != nil {
		return nil, wrap(err)
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		claimConn.Close(bg)
		return nil, err
	}
	cfg.MaxConns = int32(w.Concurrency)
	pool, err := pgxpool.ConnectConfig(bg, cfg)
	if err != nil {
		claimConn.Close(bg)
		return nil, wrap(err)
	}
	c := &shardConns{connString: connString, claim: claimConn, pool: pool}
	if err := w.setUp(c); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// setUp finds out what the shard's server has (wf.claim_tasks_any, eager
// dispatch) and listens on the queues' channels when it needs to.
func (w *Worker) setUp(c *shardConns) error {
	bg := context.Background()
	claimConn := c.claim
	if len(w.Queues) > 1 {
		if err := claimConn.QueryRow(bg, "SELECT pg_catalog.to_regprocedure("+
			"'wf.claim_tasks_any(text[],text,integer,interval,interval)') IS NOT NULL").Scan(&c.hasAny); err != nil {
			return wrap(err)
		}
		if !c.hasAny {
			for _, q := range w.Queues {
				var ch string
				if err := claimConn.QueryRow(bg, "SELECT wf.channel('queue', $1)", q).Scan(&ch); err != nil {
					return wrap(err)
				}
				if _, err := claimConn.Exec(bg, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
					return wrap(err)
				}
			}
		}
	}
	if !w.NoEager {
		if err := claimConn.QueryRow(bg, "SELECT pg_catalog.to_regprocedure("+
			"'wf.complete_and_claim(bigint,bigint,jsonb,text,text,integer,interval)') IS NOT NULL").Scan(&c.eager); err != nil {
			return wrap(err)
		}
	}
	return nil
}

// check refuses a configuration Run cannot work with: no queue, no
// handler, or a duration that is not zero (the default) but below a
// millisecond, which is nearly always an untyped number of seconds.
func (w *Worker) check() error {
	if len(w.Queues) == 0 {
		return errors.New("wfengine worker: a worker needs at least one queue")
	}
	if len(w.Handlers) == 0 && w.Handler == nil {
		return errors.New("wfengine worker: a worker needs a handler: set Handlers, Handler or both")
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"Lease", w.Lease}, {"Wait", w.Wait}, {"Heartbeat", w.Heartbeat}, {"DrainTimeout", w.DrainTimeout}} {
		if d.d != 0 && d.d < time.Millisecond {
			return fmt.Errorf("wfengine worker: %s is %v, less than a millisecond: durations are time.Duration, "+
				"write 30*time.Second for 30 seconds (0 means the default)", d.name, d.d)
		}
	}
	return nil
}

func (w *Worker) defaults() {
	if w.Concurrency < 1 {
		w.Concurrency = 4
	}
	if w.Lease <= 0 {
		w.Lease = 30 * time.Second
	}
	if w.Wait <= 0 {
		w.Wait = 10 * time.Second
	}
	if w.Heartbeat <= 0 {
		w.Heartbeat = w.Lease / 3
	}
	if w.DrainTimeout <= 0 {
		w.DrainTimeout = w.Lease
	}
	if w.Name == "" {
		h, _ := os.Hostname()
		w.Name = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if w.Logger == nil {
		w.Logger = log.Default()
	}
	w.inFlight = map[int64]*Task{}
}

// Run runs the loop until ctx is done, SIGTERM or SIGINT.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.check(); err != nil {
		return err
	}
	w.defaults()
	stop, cancelStop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer cancelStop()
	if len(w.shards()) < 2 {
		// one connection string: a failure here ends Run, as ever
		if _, err := w.current(); err != nil {
			return err
		}
	}
	defer func() {
		w.cmu.Lock()
		if w.cur != nil {
			w.cur.close()
			w.cur = nil
		}
		w.cmu.Unlock()
	}()

	beatDone := make(chan struct{})
	beatStop := make(chan struct{})
	go w.heartbeats(beatStop, beatDone)

	slots := make(chan struct{}, w.Concurrency)
	var wg sync.WaitGroup
	var loopErr error
	backoff := 100 * time.Millisecond
	failedMoves := 0 // moves since the last claim that worked
	for stop.Err() == nil {
		slots <- struct{}{} // one free slot at least
		free := 1
		for free < w.Concurrency && len(slots) < w.Concurrency {
			slots <- struct{}{}
			free++
		}
		generation := w.gen()
		c, err := w.current()
		var tasks []*Task
		if err == nil {
			generation = c.generation
			tasks, err = w.claim(stop, c.claim, c.hasAny, free)
		}
		for i := len(tasks); i < free; i++ {
			<-slots // give back what was not claimed
		}
		if err != nil {
			if stop.Err() != nil {
				break // our cancel
			}
			if w.callsForMove(err) {
				// another shard's tenant, or a shard down: the next shard
				w.move(generation, err)
				if failedMoves++; failedMoves >= len(w.shards()) { // all the way round
					select {
					case <-stop.Done():
					case <-time.After(backoff):
					}
					if backoff *= 2; backoff > 2*time.Second {
						backoff = 2 * time.Second
					}
				}
				continue
			}
			var we *WfError
			if errors.As(err, &we) && we.Retryable() {
				// a move's cut-over, a shard failing over: claim again soon
				w.Logger.Printf("wfengine worker: claim refused (%v), trying again in %v", err, backoff)
				select {
				case <-stop.Done():
				case <-time.After(backoff):
				}
				if backoff *= 2; backoff > 2*time.Second {
					backoff = 2 * time.Second
				}
				continue
			}
			loopErr = err
			break
		}
		backoff = 100 * time.Millisecond
		failedMoves = 0
		w.mu.Lock()
		for _, t := range tasks {
			w.inFlight[t.TaskID] = t
		}
		if len(w.inFlight) > w.MaxInFlight {
			w.MaxInFlight = len(w.inFlight)
		}
		w.mu.Unlock()
		for _, t := range tasks {
			wg.Add(1)
			go func(t *Task) {
				defer wg.Done()
				defer func() { <-slots }()
				// with eager dispatch a report may lease the next task
				// (the next step of the same run first): it runs at once
				// in the same slot
				for t != nil {
					t = w.execute(stop, t)
				}
			}(t)
		}
	}

	// graceful shutdown: let the tasks in flight finish
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.DrainTimeout):
		w.mu.Lock()
		for _, t := range w.inFlight {
			w.Logger.Printf("wfengine worker: task %d still running at shutdown; its lease will expire", t.TaskID)
			t.abandoned = true
			t.cancel()
		}
		w.mu.Unlock()
	}
	close(beatStop)
	<-beatDone
	return loopErr
}

func (w *Worker) claim(ctx context.Context, conn *pgx.Conn, hasAny bool, free int) ([]*Task, error) {
	if len(w.Queues) == 1 || hasAny {
		// A waiting claim ends on the server: ctx done sends a cancel
		// request and waits for it to be delivered.  (Given ctx, pgx would
		// only close its end: the claim would go on waiting on the server
		// after the process exits and lease a task nobody runs.)
		claimed := make(chan struct{})
		cancelled := make(chan struct{})
		go func() {
			defer close(cancelled)
			select {
			case <-ctx.Done():
			case <-claimed:
				return
			}
			// again every 200 ms: a request that came before the claim
			// reached the server cancelled nothing
			for {
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = conn.PgConn().CancelRequest(cctx)
				cancel()
				select {
				case <-claimed:
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
		defer func() { close(claimed); <-cancelled }()
		if len(w.Queues) == 1 {
			return Claim(context.Background(), conn, w.Queues[0], w.Name, free, w.Lease, w.Wait)
		}
		return ClaimAny(context.Background(), conn, w.Queues, w.Name, free, w.Lease, w.Wait)
	}
	// an older server: a claim per queue, then sleep until a notification
	var tasks []*Task
	for _, q := range w.Queues {
		if len(tasks) >= free {
			break
		}
		got, err := Claim(ctx, conn, q, w.Name, free-len(tasks), w.Lease, 0)
		if err != nil {
			return tasks, err
		}
		tasks = append(tasks, got...)
	}
	if len(tasks) == 0 {
		wctx, cancel := context.WithTimeout(ctx, w.Wait)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) {
			return nil, wrap(err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return tasks, nil
}

// runHandler runs the handler of t: the entry of Handlers for its activity
// (for its queue when the step has none), else the catch-all Handler, else
// a failure "unknown_activity" that is not retryable (no attempt will find
// a handler).  A panic of the handler is an error with code "exception".
func (w *Worker) runHandler(ctx context.Context, t *Task) (output interface{}, err error) {
	key := t.Queue
	if t.Activity != nil {
		key = *t.Activity
	}
	h := w.Handlers[key]
	if h == nil {
		h = w.Handler
	}
	if h == nil {
		return nil, &TaskFailure{Code: "unknown_activity", Message: "no handler for " + key, NonRetryable: true}
	}
	defer func() {
		if p := recover(); p != nil {
			w.Logger.Printf("wfengine worker: task %d: handler panicked: %v", t.TaskID, p)
			output, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	return h(ctx, t)
}

// execute runs t and reports it; it returns the task the report leased to
// this slot (eager dispatch), or nil.  stop done: no new lease.
func (w *Worker) execute(stop context.Context, t *Task) *Task {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.mu.Lock()
	t.cancel = cancel
	w.mu.Unlock()

	output, herr := w.runHandler(ctx, t)
	// a handler that returns because the drain ended (its ctx cancelled)
	// reports nothing: the task is left to its lease, as the process says
	// when it gives up on it (a failure reported now would be "cancelled",
	// which the task was not)
	w.mu.Lock()
	abandoned := t.abandoned
	w.mu.Unlock()
	if abandoned {
		return nil
	}
	var next []*Task
	report := func(pool *pgxpool.Pool, eager bool) (Answer, error) {
		var f *TaskFailure
		bg := context.Background()
		var e interface{}
		retryable := true
		switch {
		case herr == nil:
			if eager {
				a, leased, err := CompleteAndClaim(bg, pool, t.TaskID, t.Fence, output, t.Queue, w.Name, 1, w.Lease)
				next = leased
				return a, err
			}
			return Complete(bg, pool, t.TaskID, t.Fence, output)
		case errors.As(herr, &f):
			m := map[string]interface{}{"code": f.Code, "message": f.Message}
			for k, v := range f.Details {
				m[k] = v
			}
			e, retryable = m, !f.NonRetryable
		default:
			e = map[string]string{"code": "exception", "message": herr.Error()}
		}
		if eager {
			a, leased, err := FailAndClaim(bg, pool, t.TaskID, t.Fence, e, retryable, t.Queue, w.Name, 1, w.Lease)
			next = leased
			return a, err
		}
		return Fail(bg, pool, t.TaskID, t.Fence, e, retryable)
	}
	// A lost connection: report again (a repeat is "duplicate").  With eager
	// dispatch a lease handed out with a lost answer is never seen here; it
	// expires and the attempt is delivered again.
	// With a shard list, a report refused with 55W01 or whose connection
	// fails moves the worker to the next shard and is made there (answered
	// stale there after a real move).
	var a Answer
	for i, lost := 0, 0; i < 30; i++ {
		var err error
		generation := w.gen()
		c, err := w.current()
		if err == nil {
			generation = c.generation
			// nothing more is claimed while stopping
			a, err = report(c.pool, c.eager && stop.Err() == nil)
		}
		var we *WfError
		if err == nil {
			break
		} else if w.callsForMove(err) && i < 29 {
			w.Logger.Printf("wfengine worker: task %d: report failed on this shard (%v), moving on", t.TaskID, err)
			w.move(generation, err)
			if i+1 >= len(w.shards()) { // all the way round
				pause := time.Duration(i+1) * 100 * time.Millisecond
				if pause > time.Second {
					pause = time.Second
				}
				time.Sleep(pause)
			}
			continue
		} else if errors.As(err, &we) && we.Retryable() && i < 29 {
			// a move's cut-over: report again (after the move the fence is
			// stale, and the task is delivered again)
			w.Logger.Printf("wfengine worker: task %d: report refused (%v), retrying", t.TaskID, err)
			pause := time.Duration(i+1) * 100 * time.Millisecond
			if pause > time.Second {
				pause = time.Second
			}
			time.Sleep(pause)
			continue
		} else if errors.As(err, &we) {
			w.Logger.Printf("wfengine worker: task %d: report refused: %v", t.TaskID, err)
			break
		}
		if lost++; lost >= 3 {
			break
		}
		w.Logger.Printf("wfengine worker: task %d: report failed (%v), retrying", t.TaskID, err)
		time.Sleep(time.Duration(lost) * 200 * time.Millisecond)
	}
	var n *Task
	if len(next) > 0 {
		n = next[0]
	}
	w.mu.Lock()
	w.Answers = append(w.Answers, a)
	delete(w.inFlight, t.TaskID)
	if n != nil {
		w.inFlight[n.TaskID] = n
		w.HandedOn++
		if len(w.inFlight) > w.MaxInFlight {
			w.MaxInFlight = len(w.inFlight)
		}
	}
	w.mu.Unlock()
	return n
}

// heartbeats renews every lease in flight in one statement, on a
// connection of its own taken from the pool for as long as it runs.
func (w *Worker) heartbeats(stop, done chan struct{}) {
	defer close(done)
	var conn *pgx.Conn // made under generation connGen
	connGen := -1
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(w.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		w.mu.Lock()
		var ids, fences []int64
		for _, t := range w.inFlight {
			ids = append(ids, t.TaskID)
			fences = append(fences, t.Fence)
		}
		w.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		generation := w.gen()
		if conn == nil || conn.IsClosed() || connGen != generation {
			if conn != nil {
				conn.Close(context.Background())
				conn = nil
			}
			c, err := w.current()
			if err == nil {
				generation = c.generation
				conn, err = pgx.ConnectConfig(context.Background(), c.pool.Config().ConnConfig.Copy())
			}
			if err != nil {
				w.Logger.Printf("wfengine worker: heartbeat connection: %v", wrap(err))
				conn = nil
				if w.callsForMove(wrap(err)) {
					w.move(generation, err)
				}
				continue
			}
			connGen = generation
		}
		rows, err := conn.Query(context.Background(),
			"SELECT u.t, wf.heartbeat(u.t, u.f) FROM unnest($1::bigint[], $2::bigint[]) AS u(t, f)", ids, fences)
		if err != nil {
			w.Logger.Printf("wfengine worker: heartbeat failed: %v", wrap(err))
			if w.callsForMove(wrap(err)) {
				w.move(connGen, err)
			}
			continue
		}
		for rows.Next() {
			var id int64
			var a string
			if rows.Scan(&id, &a) == nil && (Answer(a) == Stale || Answer(a) == CancelRequested) {
				w.mu.Lock()
				if t := w.inFlight[id]; t != nil && t.cancel != nil {
					t.cancel()
				}
				w.mu.Unlock()
			}
		}
		if err := rows.Err(); err != nil {
			w.Logger.Printf("wfengine worker: heartbeat failed: %v", wrap(err))
			if w.callsForMove(wrap(err)) {
				w.move(connGen, err)
			}
		}
	}
}
