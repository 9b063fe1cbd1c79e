/*
 * test_e2e.c
 *	  End-to-end test of wfworker: the order workflow of test/demo.
 *
 * Usage: test_e2e ORDER_JSON_FILE, with the libpq environment naming a
 * database where wfengine is installed and the caller is a superuser (it
 * publishes the definition and calls wf.tick(), the engine worker's part:
 * `make test` runs with wfengine.enabled = off).  Exit status 0 when every
 * check passed.  The same checks as clients/python/test_e2e.py, a shard
 * list included.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wfworker.h"

static int	failures = 0;
static volatile int ticking = 1;
static volatile int slow_started = 0;
static volatile int failed_once = 0;
static char slow_run[64] = "";

static void
check(int ok, const char *what, const char *more)
{
	printf("%s %s%s%s\n", ok ? "ok    " : "NOT OK", what, more ? ": " : "", more ? more : "");
	fflush(stdout);
	if (!ok)
		failures++;
}

static PGconn *
connect_or_die(void)
{
	PGconn	   *c = PQconnectdb("");

	if (PQstatus(c) != CONNECTION_OK)
	{
		fprintf(stderr, "could not connect: %s", PQerrorMessage(c));
		exit(2);
	}
	return c;
}

/* the value of a one-row, one-column query (static buffer) */
static const char *
value(PGconn *c, const char *sql, int n, const char *const *params)
{
	static char buf[4096];
	PGresult   *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1)
	{
		fprintf(stderr, "query failed: %s: %s", sql, PQerrorMessage(c));
		exit(2);
	}
	snprintf(buf, sizeof(buf), "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return buf;
}

static void *
ticker(void *arg)
{
	PGconn	   *c = connect_or_die();

	(void) arg;
	while (ticking)
	{
		PQclear(PQexec(c, "SELECT wf.tick()"));
		usleep(200000);
	}
	PQfinish(c);
	return NULL;
}

static char *
json(const char *fmt, const WfTask *t)
{
	char	   *s = malloc(512);

	snprintf(s, 512, fmt, t->idempotency_key);
	return s;
}

/* the order workflow's handlers, one per activity (cfg.handlers) */
static WfResult
charge_card(const WfTask *t, void *arg)
{
	(void) arg;
	if (strstr(t->input, "\"c0@example.com\"") && t->attempt == 1)
	{
		failed_once++;
		/* retryable: wf_failure's default */
		return wf_failure(strdup("{\"code\": \"timeout\", \"message\": \"simulated gateway timeout\"}"));
	}
	if (strstr(t->input, "\"slow@example.com\""))
	{
		slow_started = 1;
		usleep(1500000);
	}
	return wf_ok(json("{\"charge_id\": \"ch_%s\", \"status\": \"captured\"}", t));
}

static WfResult
reserve_stock(const WfTask *t, void *arg)
{
	(void) arg;
	/* SKU-1: longer than the 1 s lease; heartbeats keep it */
	usleep(strstr(t->input, "\"SKU-1\"") ? 2500000 : 300000);
	return wf_ok(json("{\"reservation_id\": \"rsv_%s\"}", t));
}

static WfResult
send_receipt(const WfTask *t, void *arg)
{
	(void) arg;
	return wf_ok(json("{\"message_id\": \"msg_%s\"}", t));
}

static const WfHandlerEntry order_handlers[] = {
	{"charge_card", charge_card, NULL},
	{"reserve_stock", reserve_stock, NULL},
	{"send_receipt", send_receipt, NULL},
	{NULL, NULL, NULL}
};

/* waits for the six runs, starts a slow one and sends SIGTERM when it runs */
static void *
driver(void *arg)
{
	PGconn	   *c = connect_or_die();
	int			i;
	const char *p[1] = {"{\"amount\": 1, \"currency\": \"EUR\", \"customer\": \"slow@example.com\", \"sku\": \"SKU-SLOW\"}"};

	(void) arg;
	for (i = 0; i < 300; i++)
	{
		if (strcmp(value(c, "SELECT count(*) FROM wf.runs WHERE status = 'completed'", 0, NULL), "6") == 0)
			break;
		usleep(200000);
	}
	snprintf(slow_run, sizeof(slow_run), "%s", value(c, "SELECT wf.start_run('order', $1::jsonb)", 1, p));
	for (i = 0; i < 200 && !slow_started; i++)
		usleep(100000);
	if (slow_started)
		kill(getpid(), SIGTERM);
	else
		wf_worker_stop();
	PQfinish(c);
	return NULL;
}

/* eager dispatch: the two-step run on one queue, and its worker's handler */
static char pair_run[64];
/* the pair's second attempt's row as its handler saw it, leased */
static char pair_seen[256];

static WfResult
handle_pair(const WfTask *t, void *arg)
{
	(void) arg;
	/* a completed attempt's row is deleted since 0.3.0: read it while leased */
	if (strcmp(t->step, "second") == 0 && strcmp(t->run_id, pair_run) == 0)
	{
		PGconn	   *c = connect_or_die();
		char		id[32];
		const char *p[1] = {id};
		PGresult   *r;

		snprintf(id, sizeof(id), "%lld", (long long) t->task_id);
		r = PQexecParams(c, "SELECT worker || '/' || (claimed_at = created_at) || '/' || deliveries"
						 " || '/' || status FROM wf.tasks WHERE task_id = $1", 1, NULL, p, NULL, NULL, 0);
		if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
			snprintf(pair_seen, sizeof(pair_seen), "%s", PQgetvalue(r, 0, 0));
		PQclear(r);
		PQfinish(c);
	}
	return wf_ok(strdup("{\"ok\": true}"));
}

/* stops the eager worker once the pair's run has completed */
static void *
pair_stopper(void *arg)
{
	PGconn	   *c = connect_or_die();
	const char *p[1] = {pair_run};
	int			i;

	(void) arg;
	for (i = 0; i < 200; i++)
	{
		if (strcmp(value(c, "SELECT wf.run_status($1::uuid)", 1, p), "completed") == 0)
			break;
		usleep(100000);
	}
	wf_worker_stop();
	PQfinish(c);
	return NULL;
}

/* runs a statement, or exits */
static void
run_sql(PGconn *c, const char *sql)
{
	PGresult   *r = PQexec(c, sql);

	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "query failed: %s: %s", sql, PQerrorMessage(c));
		exit(2);
	}
	PQclear(r);
}

static char shard2_conninfo[256];

/* stops the shard list's worker once its three runs on s2 have completed */
static void *
shard_stopper(void *arg)
{
	PGconn	   *c = PQconnectdb(shard2_conninfo);
	int			i;

	(void) arg;
	for (i = 0; i < 300 && PQstatus(c) == CONNECTION_OK; i++)
	{
		if (strcmp(value(c, "SELECT count(*) FROM wf.runs WHERE status = 'completed'", 0, NULL), "3") == 0)
			break;
		usleep(100000);
	}
	wf_worker_stop();
	PQfinish(c);
	return NULL;
}

/*
 * A shard list: this database is shard s1, a second one shard s2, and the
 * shard map gives the test tenant's partition to s2.  A worker given
 * [s1, a shard down, s2] is refused by s1 (55W01), cannot connect to the
 * next, moves to s2 and completes the runs there.  The login is no
 * superuser (superusers skip the shard check).
 */
/* the move's handler: see test_shard_list */
static char shard_db2[128];
static char moved_run[64] = "";
static int64_t moved_task = 0,
			moved_fence = 0,
			lease_task = 0,
			lease_fence = 0;

#define SHARD_MAP_S1 "CASE wf.tenant_partition('wfc_c', 2) WHEN 0 THEN ARRAY['s1', 's2']" \
	" ELSE ARRAY['s2', 's1'] END"

static WfResult
handle_move(const WfTask *t, void *arg)
{
	(void) arg;
	if (moved_task == 0)
	{
		char		ci[256];
		PGconn	   *c;
		PGresult   *res;

		moved_task = t->task_id;
		moved_fence = t->fence;
		snprintf(ci, sizeof(ci), "dbname=%s", shard_db2);
		c = PQconnectdb(ci);
		run_sql(c, "SELECT wf.configure_shard('s2', " SHARD_MAP_S1 ")");
		PQfinish(c);
		c = PQconnectdb("");
		run_sql(c, "SELECT wf.configure_shard('s1', " SHARD_MAP_S1 ")");
		snprintf(ci, sizeof(ci), "SELECT pg_catalog.setval('wf.fence_seq', %lld)", (long long) t->fence + 1000);
		run_sql(c, ci);
		PQfinish(c);
		c = PQconnectdb("user=wfc_c_login");
		run_sql(c, "SELECT wf.publish_definition('shard_pair', '{\"steps\": ["
				"{\"name\": \"first\", \"queue\": \"c_shard\"},"
				" {\"name\": \"second\", \"queue\": \"c_shard\"}]}')");
		snprintf(moved_run, sizeof(moved_run), "%s",
				 value(c, "SELECT wf.start_run('shard_pair', '{}')", 0, NULL));
		res = PQexec(c, "SELECT task_id, fence FROM wf.claim_tasks('c_shard', 'old-shard', 1, '1 second')");
		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		{
			lease_task = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
			lease_fence = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
		}
		PQclear(res);
		PQfinish(c);
	}
	return wf_ok(strdup("{\"ok\": true}"));
}

/* ticks (the expired lease is taken back), then stops the move's worker once its run on s1 has completed */
static void *
move_stopper(void *arg)
{
	PGconn	   *admin = connect_or_die();
	PGconn	   *s1 = PQconnectdb("user=wfc_c_login");
	int			i;

	(void) arg;
	for (i = 0; i < 150; i++)
	{
		usleep(200000);
		PQclear(PQexec(admin, "SELECT wf.tick()"));
		if (moved_run[0])
		{
			const char *p[1] = {moved_run};

			if (strcmp(value(s1, "SELECT wf.run_status($1::uuid)", 1, p), "completed") == 0)
				break;
		}
	}
	wf_worker_stop();
	PQfinish(s1);
	PQfinish(admin);
	return NULL;
}

#define SHARD_MAP "CASE wf.tenant_partition('wfc_c', 2) WHEN 0 THEN ARRAY['s2', 's1']" \
	" ELSE ARRAY['s1', 's2'] END"
static void
test_shard_list(PGconn *admin)
{
	char		db2[128],
				sql[512],
				s1_conninfo[256],
				more[256];
	const char *shards[4];
	const char *sq[] = {"c_shard"};
	PGconn	   *c;
	WfWorkerConfig cfg = {0};
	WfWorkerStats stats;
	WfError		err = WF_ERROR_INIT;
	WfTask	  **tasks;
	pthread_t	drive;
	int			i,
				rc;

	snprintf(db2, sizeof(db2), "%s_s2", PQdb(admin));
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", db2);
	run_sql(admin, sql);
	run_sql(admin, "DROP ROLE IF EXISTS wfc_c_login");
	run_sql(admin, "DROP ROLE IF EXISTS wf_tenant_wfc_c");
	run_sql(admin, "SELECT wf.create_tenant('wfc_c')");
	/*
	 * the login's password is the environment's (pg_virtualenv asks for one
	 * over TCP; libpq sends PGPASSWORD), so that its connections need no
	 * other set-up
	 */
	{
		const char *pw = getenv("PGPASSWORD") != NULL ? getenv("PGPASSWORD") : "wfc_c";
		char	   *lit = PQescapeLiteral(admin, pw, strlen(pw));

		snprintf(sql, sizeof(sql), "CREATE ROLE wfc_c_login LOGIN PASSWORD %s IN ROLE wfengine_app, wfengine_worker, wfengine_admin", lit);
		PQfreemem(lit);
		run_sql(admin, sql);
	}
	run_sql(admin, "SELECT wf.add_tenant_member('wfc_c', 'wfc_c_login')");
	run_sql(admin, "SELECT wf.configure_shard('s1', " SHARD_MAP ", 1)");
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", db2);
	run_sql(admin, sql);
	snprintf(sql, sizeof(sql), "dbname=%s", db2);
	c = PQconnectdb(sql);
	run_sql(c, "CREATE EXTENSION wfengine");
	run_sql(c, "SELECT wf.configure_shard('s2', " SHARD_MAP ", 2)");
	PQfinish(c);
	snprintf(shard2_conninfo, sizeof(shard2_conninfo), "dbname=%s user=wfc_c_login", db2);
	c = PQconnectdb(shard2_conninfo);
	run_sql(c, "SELECT wf.publish_definition('shard_pair', '{\"steps\": ["
			"{\"name\": \"first\", \"queue\": \"c_shard\"},"
			" {\"name\": \"second\", \"queue\": \"c_shard\"}]}')");
	for (i = 0; i < 3; i++)
		run_sql(c, "SELECT wf.start_run('shard_pair', '{}')");

	snprintf(s1_conninfo, sizeof(s1_conninfo), "user=wfc_c_login");
	{
		PGconn	   *s1 = PQconnectdb(s1_conninfo);

		check(wf_claim(s1, "c_shard", "probe", 1, 30, 0, &tasks, &err) < 0 &&
			  strcmp(err.sqlstate, "55W01") == 0, "shard s1 refuses the tenant", err.message);
		wf_error_clear(&err);
		PQfinish(s1);
	}

	shards[0] = s1_conninfo;
	shards[1] = "host=/nonexistent user=wfc_c_login";
	shards[2] = shard2_conninfo;
	shards[3] = NULL;
	cfg.shards = shards;
	cfg.queues = sq;
	cfg.nqueues = 1;
	cfg.name = "c-shard";
	cfg.concurrency = 2;
	cfg.lease = 5.0;
	cfg.wait = 0.5;
	cfg.handler = handle_pair;
	memset(&stats, 0, sizeof(stats));
	pthread_create(&drive, NULL, shard_stopper, NULL);
	rc = wf_worker_run(&cfg, &stats, &err);
	pthread_join(drive, NULL);
	check(rc == 0, "the shard list's worker ran and stopped", err.message);
	wf_error_clear(&err);
	snprintf(more, sizeof(more), "%s",
			 value(c, "SELECT string_agg(status, ',') FROM wf.runs", 0, NULL));
	check(strcmp(more, "completed,completed,completed") == 0, "shard list: the runs on s2 completed", more);
	snprintf(more, sizeof(more), "%d moves, on shard %d", stats.moves, stats.shard);
	check(stats.moves == 2 && stats.shard == 2, "shard list: the worker moved to s2", more);
	snprintf(more, sizeof(more), "%d accepted, %d not", stats.accepted, stats.not_accepted);
	check(stats.accepted == 6 && stats.not_accepted == 0, "shard list: every report accepted", more);

	/*
	 * A move of the tenant's partition from s2 to s1 while a task leased on
	 * s2 runs, emulated as wfrouter.move_partition leaves it: s1 holds the
	 * same task (s1 takes s2's id block, so the run started there has the
	 * task's id), leased there under a newer fence (the cut-over re-fences
	 * the leases it takes), and both maps give the partition to s1.  The
	 * worker, on [s2, s1] (at s2 now), reports: s2 refuses (55W01), the
	 * worker moves to s1, where the report is stale; it drops the task,
	 * claims on s1 and completes the run there once the lease has expired.
	 */
	snprintf(shard_db2, sizeof(shard_db2), "%s", db2);
	snprintf(sql, sizeof(sql), "SELECT pg_catalog.setval('wf.task_id_seq', %s)",
			 /* the last task id s2 issued (a completed attempt has no row since 0.3.0) */
			 value(c, "SELECT max((payload->>'task_id')::bigint) FROM wf.event_log"
				   " WHERE type = 'task_scheduled'", 0, NULL));
	run_sql(admin, "SELECT wf.configure_shard('s1', " SHARD_MAP ", 2)");
	run_sql(admin, sql);
	run_sql(c, "SELECT wf.start_run('shard_pair', '{}')");
	shards[0] = shard2_conninfo;
	shards[1] = s1_conninfo;
	shards[2] = NULL;
	cfg.name = "c-move";
	cfg.concurrency = 1;
	cfg.no_eager = 1;
	cfg.handler = handle_move;
	memset(&stats, 0, sizeof(stats));
	pthread_create(&drive, NULL, move_stopper, NULL);
	rc = wf_worker_run(&cfg, &stats, &err);
	pthread_join(drive, NULL);
	check(rc == 0, "the move's worker ran and stopped", err.message);
	wf_error_clear(&err);
	snprintf(more, sizeof(more), "%lld/%lld, %lld/%lld", (long long) moved_task, (long long) moved_fence,
			 (long long) lease_task, (long long) lease_fence);
	check(lease_task == moved_task && lease_fence > moved_fence,
		  "a move: s1 holds the task leased on s2, re-fenced", more);
	snprintf(more, sizeof(more), "%d moves, %d stale, %d accepted, %d not", stats.moves, stats.stale,
			 stats.accepted, stats.not_accepted);
	check(stats.moves == 1 && stats.stale == 1 && stats.not_accepted == 1 && stats.accepted == 2,
		  "a move: the report of the lease from s2 is stale on s1, the run's two steps accepted there", more);
	{
		PGconn	   *s1 = PQconnectdb(s1_conninfo);
		const char *p[1] = {moved_run};

		snprintf(more, sizeof(more), "%s",
				 moved_run[0] ? value(s1, "SELECT wf.run_status($1::uuid)", 1, p) : "no run");
		check(strcmp(more, "completed") == 0, "a move: the worker claimed on s1 and completed the run there", more);
		PQfinish(s1);
	}
	PQfinish(c);

	run_sql(admin, "SELECT wf.configure_shard(NULL, NULL)");
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", db2);
	run_sql(admin, sql);
	run_sql(admin, "DROP ROLE IF EXISTS wfc_c_login");
	run_sql(admin, "DROP ROLE IF EXISTS wf_tenant_wfc_c");
}

int
main(int argc, char **argv)
{
	PGconn	   *admin;
	FILE	   *f;
	char		spec[8192],
				more[512];
	size_t		len;
	const char *p[1];
	const char *queues[] = {"payments", "warehouse", "email"};
	WfWorkerConfig cfg = {0};
	WfWorkerStats stats;
	WfError		err = WF_ERROR_INIT;
	pthread_t	tick,
				drive;
	int			i,
				rc;

	if (argc != 2 || (f = fopen(argv[1], "r")) == NULL)
	{
		fprintf(stderr, "usage: test_e2e ORDER_JSON_FILE\n");
		return 2;
	}
	len = fread(spec, 1, sizeof(spec) - 1, f);
	spec[len] = '\0';
	fclose(f);

	admin = connect_or_die();
	p[0] = spec;
	value(admin, "SELECT wf.publish_definition('order', $1::jsonb)", 1, p);
	for (i = 0; i < 6; i++)
	{
		char		input[256];

		snprintf(input, sizeof(input),
				 "{\"amount\": %d, \"currency\": \"EUR\", \"customer\": \"c%d@example.com\", \"sku\": \"SKU-%d\"}",
				 10 + i, i, i);
		p[0] = input;
		value(admin, "SELECT wf.start_run('order', $1::jsonb)", 1, p);
	}

	pthread_create(&tick, NULL, ticker, NULL);
	pthread_create(&drive, NULL, driver, NULL);
	cfg.conninfo = "";
	cfg.queues = queues;
	cfg.nqueues = 3;
	cfg.name = "c-e2e";
	cfg.concurrency = 4;
	cfg.lease = 1.0;
	cfg.wait = 1.0;
	cfg.heartbeat = 0.3;
	cfg.drain_timeout = 10;
	cfg.handlers = order_handlers;
	rc = wf_worker_run(&cfg, &stats, &err);
	check(rc == 0, "the worker ran and stopped", err.message);
	pthread_join(drive, NULL);
	ticking = 0;
	pthread_join(tick, NULL);

	check(strcmp(value(admin, "SELECT count(*) FILTER (WHERE status = 'completed' AND wf.verify_run(run_id))"
					   " FROM wf.runs WHERE input->>'customer' <> 'slow@example.com'", 0, NULL), "6") == 0,
		  "six order runs completed and verify", NULL);
	check(failed_once == 1, "a charge failed once (retryable)", NULL);
	/*
	 * (a completed attempt's row is deleted since 0.3.0: its completion is
	 * read from its task_completed event, its deliveries from the lease
	 * expiries before it, each followed by one delivery more)
	 */
	check(strcmp(value(admin, "SELECT count(*) FROM wf.event_log WHERE type = 'task_completed'"
					   " AND step = 'charge' AND attempt = 2", 0, NULL), "1") == 0, "the retry (attempt 2) completed", NULL);
	check(strcmp(value(admin, "SELECT CASE WHEN c.seq IS NULL THEN t.status ELSE 'completed' END || '/' ||"
					   " (1 + (SELECT count(*) FROM wf.event_log x WHERE x.run_id = s.run_id AND x.type = 'lease_expired'"
					   "       AND x.step = s.step AND x.attempt = s.attempt))"
					   " FROM wf.runs r JOIN wf.event_log s ON s.run_id = r.run_id AND s.type = 'task_scheduled'"
					   "      AND s.step = 'reserve'"
					   " LEFT JOIN wf.tasks t ON t.task_id = (s.payload->>'task_id')::bigint"
					   " LEFT JOIN wf.event_log c ON c.run_id = s.run_id AND c.type = 'task_completed'"
					   "      AND c.payload->>'task_id' = s.payload->>'task_id'"
					   " WHERE r.input->>'sku' = 'SKU-1'", 0, NULL), "completed/1") == 0,
		  "a task longer than its lease was kept by heartbeats, delivered once", NULL);
	snprintf(more, sizeof(more), "%d accepted, %d not", stats.accepted, stats.not_accepted);
	check(stats.not_accepted == 0 && stats.accepted == 20, "every report accepted", more);
	snprintf(more, sizeof(more), "at most %d at once", stats.max_in_flight);
	check(stats.max_in_flight >= 2, "tasks ran concurrently", more);
	p[0] = slow_run;
	check(slow_run[0] && strcmp(value(admin, "SELECT string_agg(s.step || ':' || CASE WHEN c.seq IS NULL"
									  " THEN t.status ELSE 'completed' END, ',' ORDER BY s.seq)"
									  " FROM wf.event_log s LEFT JOIN wf.tasks t ON t.task_id = (s.payload->>'task_id')::bigint"
									  " LEFT JOIN wf.event_log c ON c.run_id = s.run_id AND c.type = 'task_completed'"
									  "      AND c.payload->>'task_id' = s.payload->>'task_id'"
									  " WHERE s.run_id = $1::uuid AND s.type = 'task_scheduled'", 1, p),
								"charge:completed,reserve:ready") == 0,
		  "SIGTERM: the task in flight finished and nothing more was claimed", NULL);

	/* typed errors: SQLSTATE and hint */
	check(wf_complete(admin, 1, (int64_t) 1 << 40, "{}", &err) == WF_ANSWER_ERROR &&
		  strcmp(err.sqlstate, "22023") == 0 && err.hint && strstr(err.message, "fence"),
		  "an error carries SQLSTATE and hint", err.message);
	wf_error_clear(&err);
	{
		WfTask	  **tasks;

		check(wf_claim(admin, "payments", "", 1, 30, 0, &tasks, &err) < 0 &&
			  strcmp(err.sqlstate, "22023") == 0 && err.hint &&
			  strncmp(err.hint, "Name the worker", 15) == 0, "claim error", err.hint);
		wf_error_clear(&err);
	}
	check(wf_heartbeat(admin, 1, 1, &err) == WF_ANSWER_STALE, "a heartbeat of a finished attempt is stale", NULL);

	/*
	 * prepared statements: this thread's typed calls send unnamed statements
	 * until it asks for prepared ones; then each is prepared once on the
	 * connection and a second call reuses it
	 */
	{
		const char *count = "SELECT count(*) FROM pg_catalog.pg_prepared_statements"
			" WHERE name LIKE 'wfw\\_%'";
		int			before;

		check(strcmp(value(admin, count, 0, NULL), "0") == 0,
			  "typed calls are not prepared by default outside the worker", value(admin, count, 0, NULL));
		before = wf_prepare_calls(1);
		check(before == 0 && wf_heartbeat(admin, 1, 1, &err) == WF_ANSWER_STALE &&
			  wf_heartbeat(admin, 1, 1, &err) == WF_ANSWER_STALE &&
			  wf_complete(admin, 1, (int64_t) 1 << 40, "{}", &err) == WF_ANSWER_ERROR &&
			  strcmp(err.sqlstate, "22023") == 0,
			  "prepared calls answer as unnamed ones", err.message);
		wf_error_clear(&err);
		check(strcmp(value(admin, count, 0, NULL), "2") == 0,
			  "each statement prepared once on the connection", value(admin, count, 0, NULL));
		(void) wf_prepare_calls(0);
		check(wf_fail(admin, 1, (int64_t) 1 << 40, "{}", 1, &err) == WF_ANSWER_ERROR &&
			  strcmp(value(admin, count, 0, NULL), "2") == 0,
			  "wf_prepare_calls(0): unnamed statements again", value(admin, count, 0, NULL));
		wf_error_clear(&err);
	}

	/*
	 * eager dispatch: a report hands the worker the next step of its run
	 * when it is on the same queue, written leased (one call and one commit
	 * per step)
	 */
	{
		const char *eq[] = {"c_eager"};
		WfWorkerConfig ecfg = {0};
		WfWorkerStats estats;

		value(admin, "SELECT wf.publish_definition('c_pair', '{\"steps\": ["
			  "{\"name\": \"first\", \"queue\": \"c_eager\"},"
			  " {\"name\": \"second\", \"queue\": \"c_eager\"}]}')", 0, NULL);
		snprintf(pair_run, sizeof(pair_run), "%s",
				 value(admin, "SELECT wf.start_run('c_pair', '{}')", 0, NULL));
		ecfg.conninfo = "";
		ecfg.queues = eq;
		ecfg.nqueues = 1;
		ecfg.name = "c-eager";
		ecfg.concurrency = 1;
		ecfg.lease = 5.0;
		ecfg.wait = 0.5;
		ecfg.handler = handle_pair;
		pthread_create(&drive, NULL, pair_stopper, NULL);
		rc = wf_worker_run(&ecfg, &estats, &err);
		pthread_join(drive, NULL);
		check(rc == 0, "the eager worker ran and stopped", err.message);
		p[0] = pair_run;
		snprintf(more, sizeof(more), "%s %s", pair_seen,
				 value(admin, "SELECT payload->>'worker' FROM wf.event_log"
					   " WHERE run_id = $1::uuid AND type = 'task_completed' AND step = 'second'", 1, p));
		check(strcmp(more, "c-eager/true/1/leased c-eager") == 0,
			  "eager dispatch: the second step was leased by the first one's report", more);
		snprintf(more, sizeof(more), "%d handed on, %d accepted, %d not", estats.handed_on,
				 estats.accepted, estats.not_accepted);
		check(estats.handed_on == 1 && estats.accepted == 2 && estats.not_accepted == 0,
			  "eager dispatch: one task handed on, both reports accepted", more);
		check(strcmp(value(admin, "SELECT wf.verify_run($1::uuid)", 1, p), "t") == 0,
			  "the pair's run verifies", NULL);
	}
	test_shard_list(admin);
	PQfinish(admin);
	printf("c client: %s\n", failures ? "FAILED" : "passed");
	return failures ? 1 : 0;
}
