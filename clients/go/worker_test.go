package worker

// End-to-end test: the order workflow of test/demo, through one Worker of
// three queues.  Connects with the libpq environment (PGHOST, PGDATABASE,
// ...) to a database with wfengine, as a superuser (it publishes and calls
// wf.tick(), the engine worker's part: `make test` runs with
// wfengine.enabled = off).  The same checks as clients/python/test_e2e.py.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v4"
)

func TestOrderWorkflow(t *testing.T) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	one := func(sql string, args ...interface{}) string {
		var s string
		if err := admin.QueryRow(ctx, "SELECT ("+sql+")::text", args...).Scan(&s); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return s
	}
	spec, err := os.ReadFile(filepath.Join("..", "..", "test", "demo", "order.json"))
	if err != nil {
		wd, _ := os.Getwd()
		// GOPATH mode runs in a symlinked directory: try the real one
		real, _ := filepath.EvalSymlinks(wd)
		if spec, err = os.ReadFile(filepath.Join(real, "..", "..", "test", "demo", "order.json")); err != nil {
			t.Fatal(err)
		}
	}
	one("SELECT wf.publish_definition('order', $1::text::jsonb)", string(spec))
	var runs []string
	for i := 0; i < 6; i++ {
		in := fmt.Sprintf(`{"amount": %d, "currency": "EUR", "customer": "c%d@example.com", "sku": "SKU-%d"}`, 10+i, i, i)
		runs = append(runs, one("SELECT wf.start_run('order', $1::text::jsonb)", in))
	}

	// the engine worker's part: due timers (retry backoff), expired leases
	tickCtx, stopTicks := context.WithCancel(ctx)
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		c, err := pgx.Connect(ctx, "")
		if err != nil {
			return
		}
		defer c.Close(ctx)
		for tickCtx.Err() == nil {
			c.Exec(ctx, "SELECT wf.tick()")
			time.Sleep(200 * time.Millisecond)
		}
	}()

	var failedOnce, slowStarted int32
	type in struct{ Customer, Sku string }
	parse := func(t *Task) in {
		var v in
		json.Unmarshal(t.Input, &v)
		return v
	}
	w := &Worker{
		Queues: []string{"payments", "warehouse", "email"}, Name: "go-e2e",
		Concurrency: 4, Lease: time.Second, Wait: time.Second, Heartbeat: 300 * time.Millisecond, DrainTimeout: 10 * time.Second,
		Handlers: map[string]Handler{
			"charge_card": func(ctx context.Context, t *Task) (interface{}, error) {
				v := parse(t)
				if v.Customer == "c0@example.com" && t.Attempt == 1 {
					atomic.AddInt32(&failedOnce, 1)
					return nil, &TaskFailure{Code: "timeout", Message: "simulated gateway timeout"} // retryable: the zero value
				}
				if v.Customer == "slow@example.com" {
					atomic.StoreInt32(&slowStarted, 1)
					time.Sleep(1500 * time.Millisecond)
				}
				return map[string]string{"charge_id": "ch_" + t.IdempotencyKey, "status": "captured"}, nil
			},
			"reserve_stock": func(ctx context.Context, t *Task) (interface{}, error) {
				d := 300 * time.Millisecond
				if parse(t).Sku == "SKU-1" {
					d = 2500 * time.Millisecond // longer than the 1 s lease: heartbeats keep it
				}
				time.Sleep(d)
				return map[string]string{"reservation_id": "rsv_" + t.IdempotencyKey}, nil
			},
			"send_receipt": func(ctx context.Context, t *Task) (interface{}, error) {
				return map[string]interface{}{"message_id": fmt.Sprintf("msg_%d", t.TaskID)}, nil
			},
		},
	}

	var slowRun string
	driven := make(chan struct{})
	go func() {
		defer close(driven)
		c, err := pgx.Connect(ctx, "")
		if err != nil {
			return
		}
		defer c.Close(ctx)
		for i := 0; i < 300; i++ {
			var n int
			c.QueryRow(ctx, "SELECT count(*) FROM wf.runs WHERE status = 'completed'").Scan(&n)
			if n == 6 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		c.QueryRow(ctx, "SELECT wf.start_run('order', $1::text::jsonb)::text",
			`{"amount": 1, "currency": "EUR", "customer": "slow@example.com", "sku": "SKU-SLOW"}`).Scan(&slowRun)
		for i := 0; i < 200 && atomic.LoadInt32(&slowStarted) == 0; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}()

	t0 := time.Now()
	if err := w.Run(ctx); err != nil {
		t.Errorf("Run: %v", err)
	}
	elapsed := time.Since(t0)
	<-driven
	stopTicks()
	<-ticked

	check := func(ok bool, what string, args ...interface{}) {
		if ok {
			t.Logf("ok     "+what, args...)
		} else {
			t.Errorf("NOT OK "+what, args...)
		}
	}
	var statuses []string
	verified := true
	for _, r := range runs {
		statuses = append(statuses, one("SELECT wf.run_status($1::uuid)", r))
		verified = verified && one("SELECT wf.verify_run($1::uuid)", r) == "true"
	}
	check(strings.Join(statuses, ",") == strings.TrimSuffix(strings.Repeat("completed,", 6), ","),
		"six order runs completed: %v", statuses)
	check(verified, "wf.verify_run holds for every run")
	check(atomic.LoadInt32(&failedOnce) == 1, "a charge failed once (retryable)")
	// (a completed attempt's row is deleted since 0.3.0: its completion is
	// read from its task_completed event, its deliveries from the lease
	// expiries before it, each followed by one delivery more)
	check(one("SELECT count(*) FROM wf.event_log WHERE type = 'task_completed' AND step = 'charge' AND attempt = 2") == "1",
		"the retry (attempt 2) completed")
	sr := one("SELECT CASE WHEN c.seq IS NULL THEN t.status ELSE 'completed' END || '/' ||" +
		" (1 + (SELECT count(*) FROM wf.event_log x WHERE x.run_id = s.run_id AND x.type = 'lease_expired'" +
		"       AND x.step = s.step AND x.attempt = s.attempt))" +
		" FROM wf.runs r JOIN wf.event_log s ON s.run_id = r.run_id AND s.type = 'task_scheduled' AND s.step = 'reserve'" +
		" LEFT JOIN wf.tasks t ON t.task_id = (s.payload->>'task_id')::bigint" +
		" LEFT JOIN wf.event_log c ON c.run_id = s.run_id AND c.type = 'task_completed'" +
		"      AND c.payload->>'task_id' = s.payload->>'task_id'" +
		" WHERE r.input->>'sku' = 'SKU-1'")
	check(sr == "completed/1", "a task longer than its lease was kept by heartbeats, delivered once: %s", sr)
	accepted := 0
	for _, a := range w.Answers {
		if a == Accepted {
			accepted++
		}
	}
	check(accepted == 20 && len(w.Answers) == 20, "every report accepted (%d of %d)", accepted, len(w.Answers))
	check(w.MaxInFlight >= 2, "tasks ran concurrently (at most %d at once)", w.MaxInFlight)
	slow := ""
	if slowRun != "" {
		slow = one("SELECT string_agg(s.step || ':' || CASE WHEN c.seq IS NULL THEN t.status ELSE 'completed' END,"+
			" ',' ORDER BY s.seq)"+
			" FROM wf.event_log s LEFT JOIN wf.tasks t ON t.task_id = (s.payload->>'task_id')::bigint"+
			" LEFT JOIN wf.event_log c ON c.run_id = s.run_id AND c.type = 'task_completed'"+
			"      AND c.payload->>'task_id' = s.payload->>'task_id'"+
			" WHERE s.run_id = $1::uuid AND s.type = 'task_scheduled'", slowRun)
	}
	check(slow == "charge:completed,reserve:ready", "SIGTERM: the task in flight finished and nothing more was claimed: %s", slow)
	check(elapsed < 60*time.Second, "the worker stopped (%v)", elapsed)

	_, err = Complete(ctx, admin, 1, 1<<40, nil)
	var we *WfError
	check(errors.As(err, &we) && we.SQLState == "22023" && we.Hint != "" && strings.Contains(we.Message, "fence"),
		"WfError carries SQLSTATE and hint: %v", err)
	_, err = Claim(ctx, admin, "payments", "", 1, 30*time.Second, 0)
	check(errors.As(err, &we) && we.SQLState == "22023" && strings.HasPrefix(we.Hint, "Name the worker"), "claim error: %v", err)
	a, err := Heartbeat(ctx, admin, 1, 1)
	check(err == nil && a == Stale, "a heartbeat of a finished attempt is stale: %v %v", a, err)
}

// TestEagerDispatch: a report hands the worker the next step of its run
// when it is on the same queue, written leased (one call and one commit per
// step).
func TestEagerDispatch(t *testing.T) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var run string
	if _, err := admin.Exec(ctx, `SELECT wf.publish_definition('go_pair', '{"steps": [
		{"name": "first", "queue": "go_eager"}, {"name": "second", "queue": "go_eager"}]}')`); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(ctx, "SELECT wf.start_run('go_pair', '{}')::text").Scan(&run); err != nil {
		t.Fatal(err)
	}
	// the second attempt's row as its handler sees it, leased (the row of a
	// completed attempt is deleted since 0.3.0)
	seenLeased := ""
	w := &Worker{Queues: []string{"go_eager"}, Name: "go-eager", Concurrency: 1, Lease: 5 * time.Second, Wait: 500 * time.Millisecond,
		Handler: func(hctx context.Context, task *Task) (interface{}, error) {
			if task.Step == "second" {
				c, err := pgx.Connect(hctx, "")
				if err != nil {
					return nil, err
				}
				defer c.Close(hctx)
				if err := c.QueryRow(hctx, "SELECT worker || '/' || (claimed_at = created_at) || '/' || deliveries"+
					" || '/' || status FROM wf.tasks WHERE task_id = $1", task.TaskID).Scan(&seenLeased); err != nil {
					return nil, err
				}
			}
			return map[string]string{"step": task.Step}, nil
		}}
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	status := ""
	for i := 0; i < 200 && status != "completed"; i++ {
		time.Sleep(100 * time.Millisecond)
		admin.QueryRow(ctx, "SELECT wf.run_status($1::uuid)", run).Scan(&status)
	}
	stop()
	if err := <-ran; err != nil {
		t.Errorf("Run: %v", err)
	}
	var completedBy string
	if err := admin.QueryRow(ctx, "SELECT payload->>'worker' FROM wf.event_log"+
		" WHERE run_id = $1::uuid AND type = 'task_completed' AND step = 'second'", run).Scan(&completedBy); err != nil {
		t.Fatal(err)
	}
	second := seenLeased + " " + completedBy
	if second != "go-eager/true/1/leased go-eager" {
		t.Errorf("NOT OK eager dispatch: the second step was leased by the first one's report: %s", second)
	}
	if w.HandedOn != 1 || len(w.Answers) != 2 || w.Answers[0] != Accepted || w.Answers[1] != Accepted {
		t.Errorf("NOT OK eager dispatch: one task handed on, both reports accepted (%d, %v)", w.HandedOn, w.Answers)
	}
	var verified bool
	if err := admin.QueryRow(ctx, "SELECT wf.verify_run($1::uuid)", run).Scan(&verified); err != nil || !verified {
		t.Errorf("NOT OK the pair's run verifies: %v %v", verified, err)
	}
}

// TestShardList: this database is shard s1, a second one shard s2, and the
// shard map gives the test tenant's partition to s2.  A worker given
// Shards [s1, a shard down, s2] is refused by s1 (55W01), cannot connect to
// the next, moves to s2 and completes the runs there.  The login is no
// superuser (superusers skip the shard check).
func TestShardList(t *testing.T) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	exec := func(c *pgx.Conn, sql string, args ...interface{}) {
		if _, err := c.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var db1 string
	if err := admin.QueryRow(ctx, "SELECT current_database()").Scan(&db1); err != nil {
		t.Fatal(err)
	}
	db2 := db1 + "_s2"
	const tenant, login = "wfc_go", "wfc_go_login"
	const shardMap = "CASE wf.tenant_partition($1, 2) WHEN 0 THEN ARRAY['s2', 's1'] ELSE ARRAY['s1', 's2'] END"
	exec(admin, "DROP DATABASE IF EXISTS "+db2+" WITH (FORCE)")
	exec(admin, "DROP ROLE IF EXISTS "+login)
	exec(admin, "DROP ROLE IF EXISTS wf_tenant_"+tenant)
	exec(admin, "SELECT wf.create_tenant($1)", tenant)
	// the login's password is the environment's (pg_virtualenv asks for one over
	// TCP; pgx sends PGPASSWORD), so that its connections need no other set-up
	pw := os.Getenv("PGPASSWORD")
	if pw == "" {
		pw = "wfc_go"
	}
	exec(admin, "CREATE ROLE "+login+" LOGIN PASSWORD '"+strings.ReplaceAll(pw, "'", "''")+"' IN ROLE wfengine_app, wfengine_worker, wfengine_admin")
	exec(admin, "SELECT wf.add_tenant_member($1, $2)", tenant, login)
	defer func() {
		exec(admin, "SELECT wf.configure_shard(NULL, NULL)")
		exec(admin, "DROP DATABASE IF EXISTS "+db2+" WITH (FORCE)")
		exec(admin, "DROP ROLE IF EXISTS "+login)
		exec(admin, "DROP ROLE IF EXISTS wf_tenant_"+tenant)
	}()
	exec(admin, "SELECT wf.configure_shard('s1', "+shardMap+", 1)", tenant)
	exec(admin, "CREATE DATABASE "+db2)
	a2, err := pgx.Connect(ctx, "dbname="+db2)
	if err != nil {
		t.Fatal(err)
	}
	exec(a2, "CREATE EXTENSION wfengine")
	exec(a2, "SELECT wf.configure_shard('s2', "+shardMap+", 2)", tenant)
	a2.Close(ctx)
	s2, err := pgx.Connect(ctx, "dbname="+db2+" user="+login)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(ctx)
	exec(s2, `SELECT wf.publish_definition('shard_pair', '{"steps": [
		{"name": "first", "queue": "go_shard"}, {"name": "second", "queue": "go_shard"}]}')`)
	var runs []string
	for i := 0; i < 3; i++ {
		var r string
		if err := s2.QueryRow(ctx, "SELECT wf.start_run('shard_pair', '{}')::text").Scan(&r); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	s1, err := pgx.Connect(ctx, "user="+login)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Claim(ctx, s1, "go_shard", "probe", 1, 30*time.Second, 0)
	s1.Close(ctx)
	var we *WfError
	if !errors.As(err, &we) || we.SQLState != "55W01" {
		t.Errorf("NOT OK shard s1 refuses the tenant: %v", err)
	}
	w := &Worker{Shards: []string{"user=" + login, "host=/nonexistent user=" + login, "dbname=" + db2 + " user=" + login},
		Queues: []string{"go_shard"}, Name: "go-shard", Concurrency: 2, Lease: 5 * time.Second, Wait: 500 * time.Millisecond,
		Handler: func(_ context.Context, task *Task) (interface{}, error) {
			return map[string]string{"step": task.Step}, nil
		}}
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	n := 0
	for i := 0; i < 300 && n < 3; i++ {
		time.Sleep(100 * time.Millisecond)
		s2.QueryRow(ctx, "SELECT count(*) FROM wf.runs WHERE status = 'completed'").Scan(&n)
	}
	stop()
	if err := <-ran; err != nil {
		t.Errorf("Run: %v", err)
	}
	for _, r := range runs {
		var status string
		s2.QueryRow(ctx, "SELECT wf.run_status($1::uuid)", r).Scan(&status)
		if status != "completed" {
			t.Errorf("NOT OK shard list: run %s on s2 completed: %s", r, status)
		}
	}
	if w.Moves != 2 || w.Shard() != "dbname="+db2+" user="+login {
		t.Errorf("NOT OK shard list: the worker moved to s2 (%d moves, on %q)", w.Moves, w.Shard())
	}
	if len(w.Answers) != 6 {
		t.Errorf("NOT OK shard list: six reports: %v", w.Answers)
	}
	for _, a := range w.Answers {
		if a != Accepted {
			t.Errorf("NOT OK shard list: every report accepted: %v", w.Answers)
			break
		}
	}

	// A move of the tenant's partition from s2 to s1 while a task leased on
	// s2 runs, emulated as wfrouter.move_partition leaves it: s1 holds the
	// same task (s1 takes s2's id block, so the run started there has the
	// task's id), leased there under a newer fence (the cut-over re-fences
	// the leases it takes), and both maps give the partition to s1.  The
	// worker, on [s2, s1] (at s2 now), reports: s2 refuses (55W01), the
	// worker moves to s1, where the report is stale; it drops the task,
	// claims on s1 and completes the run there once the lease has expired.
	const shardMapS1 = "CASE wf.tenant_partition($1, 2) WHEN 0 THEN ARRAY['s1', 's2'] ELSE ARRAY['s2', 's1'] END"
	var lastID int64
	// the last task id s2 issued (a completed attempt has no row since 0.3.0)
	if err := s2.QueryRow(ctx, "SELECT max((payload->>'task_id')::bigint) FROM wf.event_log WHERE type = 'task_scheduled'").Scan(&lastID); err != nil {
		t.Fatal(err)
	}
	exec(admin, "SELECT wf.configure_shard('s1', "+shardMap+", 2)", tenant)
	exec(admin, "SELECT pg_catalog.setval('wf.task_id_seq', $1)", lastID)
	exec(s2, "SELECT wf.start_run('shard_pair', '{}')")
	var movedTask, movedFence, leaseTask, leaseFence int64
	var movedRun string
	var movedMu sync.Mutex // movedRun: written by the handler, read by the test
	moveUnder := func(_ context.Context, task *Task) (interface{}, error) {
		if movedTask == 0 {
			movedTask, movedFence = task.TaskID, task.Fence
			c2, err := pgx.Connect(ctx, "dbname="+db2)
			if err != nil {
				return nil, err
			}
			defer c2.Close(ctx)
			c1, err := pgx.Connect(ctx, "")
			if err != nil {
				return nil, err
			}
			defer c1.Close(ctx)
			if _, err := c2.Exec(ctx, "SELECT wf.configure_shard('s2', "+shardMapS1+")", tenant); err != nil {
				return nil, err
			}
			if _, err := c1.Exec(ctx, "SELECT wf.configure_shard('s1', "+shardMapS1+")", tenant); err != nil {
				return nil, err
			}
			if _, err := c1.Exec(ctx, "SELECT pg_catalog.setval('wf.fence_seq', $1)", task.Fence+1000); err != nil {
				return nil, err
			}
			l1, err := pgx.Connect(ctx, "user="+login)
			if err != nil {
				return nil, err
			}
			defer l1.Close(ctx)
			if _, err := l1.Exec(ctx, `SELECT wf.publish_definition('shard_pair', '{"steps": [
				{"name": "first", "queue": "go_shard"}, {"name": "second", "queue": "go_shard"}]}')`); err != nil {
				return nil, err
			}
			var run string
			if err := l1.QueryRow(ctx, "SELECT wf.start_run('shard_pair', '{}')::text").Scan(&run); err != nil {
				return nil, err
			}
			movedMu.Lock()
			movedRun = run
			movedMu.Unlock()
			if err := l1.QueryRow(ctx, "SELECT task_id, fence FROM wf.claim_tasks('go_shard', 'old-shard', 1, '1 second')").
				Scan(&leaseTask, &leaseFence); err != nil {
				return nil, err
			}
		}
		return map[string]string{"step": task.Step}, nil
	}
	mw := &Worker{Shards: []string{"dbname=" + db2 + " user=" + login, "user=" + login},
		Queues: []string{"go_shard"}, Name: "go-move", Concurrency: 1, Lease: 5 * time.Second, Wait: 500 * time.Millisecond,
		NoEager: true, Handler: moveUnder}
	s1, err = pgx.Connect(ctx, "user="+login) // the tenant's runs on s1
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close(ctx)
	mctx, mstop := context.WithCancel(ctx)
	mran := make(chan error, 1)
	go func() { mran <- mw.Run(mctx) }()
	status := ""
	for i := 0; i < 150 && status != "completed"; i++ {
		time.Sleep(200 * time.Millisecond)
		exec(admin, "SELECT wf.tick()") // takes the expired lease back
		movedMu.Lock()
		run := movedRun
		movedMu.Unlock()
		if run != "" {
			s1.QueryRow(ctx, "SELECT wf.run_status($1::uuid)", run).Scan(&status)
		}
	}
	mstop()
	if err := <-mran; err != nil {
		t.Errorf("Run: %v", err)
	}
	if leaseTask != movedTask || leaseFence <= movedFence {
		t.Errorf("NOT OK a move: s1 holds the task leased on s2, re-fenced: %d/%d, %d/%d",
			movedTask, movedFence, leaseTask, leaseFence)
	}
	if len(mw.Answers) == 0 || mw.Answers[0] != Stale || mw.Moves != 1 {
		t.Errorf("NOT OK a move: the report of the lease from s2 is stale on s1 (%d moves): %v", mw.Moves, mw.Answers)
	}
	if status != "completed" {
		t.Errorf("NOT OK a move: the worker claimed on s1 and completed the run there: %q", status)
	}
}
