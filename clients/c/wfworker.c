/*
 * wfworker.c
 *	  A small worker library for wfengine in C (libpq, POSIX threads).
 *
 * Threads and connections (each connection in autocommit, so every call is
 * its own transaction):
 *   - the caller's thread claims, on the claim connection, as many tasks as
 *     there are free slots, with a wait (wf.claim_tasks for one queue,
 *     wf.claim_tasks_any for several when the server has it, else a claim
 *     per queue and a LISTEN on their channels), and queues them;
 *   - `concurrency` task threads each take a task, run the handler and
 *     report on a connection of their own;
 *   - a heartbeat thread renews the leases of every task in flight, in one
 *     statement, on a connection of its own.
 *
 * Shutdown: the signal handler (or wf_worker_stop) sets a flag and cancels
 * the waiting claim with PQcancel, which libpq documents as safe in a
 * signal handler.  A cancelled claim rolls back: it leased nothing.  The
 * tasks in flight then finish and report, heartbeaten, for up to
 * drain_timeout seconds; wfengine has no call to hand a lease back, so a
 * task still running after that is left to its lease, which expires (the
 * engine delivers the attempt again).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "wfworker.h"

#define CLAIM_COLUMNS "task_id, run_id, step, attempt, fence, idempotency_key, input," \
	" lease_expires_at, queue, activity, deliveries"

/* ---- errors and answers ---- */

static char *
dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

void
wf_error_clear(WfError *err)
{
	if (err == NULL)
		return;
	free(err->message);
	free(err->detail);
	free(err->hint);
	memset(err, 0, sizeof(WfError));
}

/* fills err from a failed result (or the connection's message) */
static void
set_error(WfError *err, PGconn *conn, const PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

	if (err == NULL)
		return;
	wf_error_clear(err);
	snprintf(err->sqlstate, sizeof(err->sqlstate), "%s", state ? state : "");
	err->message = strdup(msg ? msg : PQerrorMessage(conn));
	if (res)
	{
		err->detail = dup_or_null(PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL));
		err->hint = dup_or_null(PQresultErrorField(res, PG_DIAG_MESSAGE_HINT));
	}
}

const char *
wf_answer_name(WfAnswer a)
{
	switch (a)
	{
		case WF_ANSWER_ACCEPTED:
			return "accepted";
		case WF_ANSWER_DUPLICATE:
			return "duplicate";
		case WF_ANSWER_STALE:
			return "stale";
		case WF_ANSWER_CANCEL_REQUESTED:
			return "cancel_requested";
		case WF_ANSWER_OK:
			return "ok";
		default:
			return "error";
	}
}

static WfAnswer
parse_answer(const char *s)
{
	static const WfAnswer all[] = {WF_ANSWER_ACCEPTED, WF_ANSWER_DUPLICATE, WF_ANSWER_STALE,
	WF_ANSWER_CANCEL_REQUESTED, WF_ANSWER_OK};
	size_t		i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(s, wf_answer_name(all[i])) == 0)
			return all[i];
	return WF_ANSWER_ERROR;
}

/* ---- prepared statements ----
 *
 * The worker's threads (wf_worker_run, unless cfg.no_prepare) send each
 * statement prepared: once per connection PQprepare, then only
 * PQexecPrepared, so the server neither parses nor plans a call again
 * (docs/workers.md, "What it costs").  A statement's name is
 * "wfw_<FNV-1a of its text>".  Each thread remembers what it prepared on
 * the connections it used last (a connection is one thread's: the claim
 * loop's, a task thread's, the heartbeat thread's), by the PGconn and its
 * backend's pid, so that a new connection starts with nothing prepared.
 * Should the server not have a statement the thread thinks it has (a pooler
 * that discarded it), the call prepares it again and runs once more; should
 * it have one the thread forgot, PQprepare's 42P05 means it is there.
 * Only outside a transaction block: a failed PQprepare would abort the
 * caller's transaction.  The typed calls made from other threads send
 * unnamed statements, as before, unless the thread says otherwise
 * (wf_prepare_calls).
 */
#define WF_PREPARED_CONNS 2
#define WF_PREPARED_MAX 16		/* more than the statements the worker sends */

typedef struct PreparedOn
{
	PGconn	   *conn;
	int			pid;
	int			n;
	uint64_t	stmt[WF_PREPARED_MAX];	/* the hashes of the statements */
} PreparedOn;

static _Thread_local int prepare_calls;	/* this thread prepares */
static _Thread_local PreparedOn prepared_on[WF_PREPARED_CONNS];
static _Thread_local int prepared_next;

static uint64_t
statement_hash(const char *sql)
{
	uint64_t	h = UINT64_C(14695981039346656037);

	for (; *sql; sql++)
		h = (h ^ (unsigned char) *sql) * UINT64_C(1099511628211);
	return h;
}

/* what this thread prepared on conn (an entry of its own for a new one) */
static PreparedOn *
prepared_for(PGconn *conn)
{
	int			pid = PQbackendPID(conn);
	PreparedOn *p;
	int			i;

	for (i = 0; i < WF_PREPARED_CONNS; i++)
		if (prepared_on[i].conn == conn && prepared_on[i].pid == pid)
			return &prepared_on[i];
	p = &prepared_on[prepared_next];
	prepared_next = (prepared_next + 1) % WF_PREPARED_CONNS;
	p->conn = conn;
	p->pid = pid;
	p->n = 0;
	return p;
}

static int
has_sqlstate(const PGresult *res, const char *state)
{
	const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	return s != NULL && strcmp(s, state) == 0;
}

/* runs sql as the statement this thread prepared on conn (preparing it first) */
static PGresult *
exec_prepared(PGconn *conn, const char *sql, int n, const char *const *params)
{
	PreparedOn *p = prepared_for(conn);
	uint64_t	h = statement_hash(sql);
	char		name[32];
	PGresult   *res;
	int			known = 0;
	int			i;
	int			round;

	snprintf(name, sizeof(name), "wfw_%016" PRIx64, h);
	for (i = 0; i < p->n; i++)
		if (p->stmt[i] == h)
			known = 1;
	for (round = 0; round < 2; round++)
	{
		if (!known)
		{
			res = PQprepare(conn, name, sql, n, NULL);
			if (PQresultStatus(res) != PGRES_COMMAND_OK && !has_sqlstate(res, "42P05"))
				return res;		/* the error, as the statement's would be */
			PQclear(res);
			if (p->n < WF_PREPARED_MAX)
				p->stmt[p->n++] = h;
			known = 1;
		}
		res = PQexecPrepared(conn, name, n, params, NULL, NULL, 0);
		if (!has_sqlstate(res, "26000"))
			return res;
		/* the server does not have it (any more): prepare it again */
		PQclear(res);
		p->n = 0;
		known = 0;
	}
	return PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
}

int
wf_prepare_calls(int on)
{
	int			before = prepare_calls;

	prepare_calls = on != 0;
	return before;
}

/* ---- the worker calls ---- */

/* runs sql with text parameters; NULL (err filled) unless it returned rows */
static PGresult *
exec(PGconn *conn, const char *sql, int n, const char *const *params, WfError *err)
{
	PGresult   *res;

	if (prepare_calls && PQtransactionStatus(conn) == PQTRANS_IDLE)
		res = exec_prepared(conn, sql, n, params);
	else
		res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		set_error(err, conn, res);
		PQclear(res);
		return NULL;
	}
	return res;
}

static WfAnswer
answer_of(PGconn *conn, const char *sql, int n, const char *const *params, WfError *err)
{
	PGresult   *res = exec(conn, sql, n, params, err);
	WfAnswer	a;

	if (res == NULL)
		return WF_ANSWER_ERROR;
	a = PQntuples(res) == 1 ? parse_answer(PQgetvalue(res, 0, 0)) : WF_ANSWER_ERROR;
	PQclear(res);
	return a;
}

void
wf_task_free(WfTask *t)
{
	if (t == NULL)
		return;
	free(t->run_id);
	free(t->step);
	free(t->idempotency_key);
	free(t->input);
	free(t->queue);
	free(t->activity);
	free(t->lease_expires_at);
	free(t);
}

/*
 * the rows of res as tasks, their columns those of a claim from column off
 * on (a row whose task_id is NULL is none); returns their number, or -1;
 * does not free res
 */
static int
tasks_from(PGresult *res, int off, WfTask ***tasks)
{
	int			rows,
				n = 0,
				i;

	if (res == NULL)
		return -1;
	rows = PQntuples(res);
	*tasks = calloc(rows > 0 ? rows : 1, sizeof(WfTask *));
	for (i = 0; i < rows; i++)
	{
		WfTask	   *t;

		if (PQgetisnull(res, i, off))
			continue;
		t = calloc(1, sizeof(WfTask));
		t->task_id = strtoll(PQgetvalue(res, i, off), NULL, 10);
		t->run_id = strdup(PQgetvalue(res, i, off + 1));
		t->step = strdup(PQgetvalue(res, i, off + 2));
		t->attempt = atoi(PQgetvalue(res, i, off + 3));
		t->fence = strtoll(PQgetvalue(res, i, off + 4), NULL, 10);
		t->idempotency_key = strdup(PQgetvalue(res, i, off + 5));
		t->input = strdup(PQgetvalue(res, i, off + 6));
		t->lease_expires_at = strdup(PQgetvalue(res, i, off + 7));
		t->queue = strdup(PQgetvalue(res, i, off + 8));
		t->activity = PQgetisnull(res, i, off + 9) ? NULL : strdup(PQgetvalue(res, i, off + 9));
		t->deliveries = atoi(PQgetvalue(res, i, off + 10));
		(*tasks)[n++] = t;
	}
	return n;
}

/* the rows of a claim as tasks; returns their number, or -1 */
static int
tasks_of(PGresult *res, WfTask ***tasks)
{
	int			n = tasks_from(res, 0, tasks);

	PQclear(res);
	return n;
}

int
wf_claim(PGconn *conn, const char *queue, const char *worker, int max_tasks,
		 double lease, double wait, WfTask ***tasks, WfError *err)
{
	char		maxs[16],
				leases[48],
				waits[48];
	const char *p[5] = {queue, worker, maxs, leases, wait > 0 ? waits : NULL};

	snprintf(maxs, sizeof(maxs), "%d", max_tasks);
	snprintf(leases, sizeof(leases), "%.3f seconds", lease);
	snprintf(waits, sizeof(waits), "%.3f seconds", wait);
	return tasks_of(exec(conn, "SELECT " CLAIM_COLUMNS
						 " FROM wf.claim_tasks($1, $2, $3::integer, $4::interval, $5::interval)",
						 5, p, err), tasks);
}

/* a text[] literal of names: {"a","b"} */
static char *
array_literal(const char *const *items, int n)
{
	size_t		len = 3;
	char	   *s,
			   *o;
	int			i;

	for (i = 0; i < n; i++)
		len += 2 * strlen(items[i]) + 3;
	o = s = malloc(len);
	*o++ = '{';
	for (i = 0; i < n; i++)
	{
		const char *c;

		if (i > 0)
			*o++ = ',';
		*o++ = '"';
		for (c = items[i]; *c; c++)
		{
			if (*c == '"' || *c == '\\')
				*o++ = '\\';
			*o++ = *c;
		}
		*o++ = '"';
	}
	*o++ = '}';
	*o = '\0';
	return s;
}

int
wf_claim_any(PGconn *conn, const char *const *queues, int nqueues, const char *worker,
			 int max_tasks, double lease, double wait, WfTask ***tasks, WfError *err)
{
	char		maxs[16],
				leases[48],
				waits[48];
	char	   *qs = array_literal(queues, nqueues);
	const char *p[5] = {qs, worker, maxs, leases, wait > 0 ? waits : NULL};
	int			n;

	snprintf(maxs, sizeof(maxs), "%d", max_tasks);
	snprintf(leases, sizeof(leases), "%.3f seconds", lease);
	snprintf(waits, sizeof(waits), "%.3f seconds", wait);
	n = tasks_of(exec(conn, "SELECT " CLAIM_COLUMNS
					  " FROM wf.claim_tasks_any($1::text[], $2, $3::integer, $4::interval, $5::interval)",
					  5, p, err), tasks);
	free(qs);
	return n;
}

WfAnswer
wf_complete(PGconn *conn, int64_t task_id, int64_t fence, const char *output_json,
			WfError *err)
{
	char		t[24],
				f[24];
	const char *p[3] = {t, f, output_json ? output_json : "{}"};

	snprintf(t, sizeof(t), "%" PRId64, task_id);
	snprintf(f, sizeof(f), "%" PRId64, fence);
	return answer_of(conn, "SELECT wf.complete_task($1::bigint, $2::bigint, $3::jsonb)", 3, p, err);
}

WfAnswer
wf_fail(PGconn *conn, int64_t task_id, int64_t fence, const char *error_json, int retryable,
		WfError *err)
{
	char		t[24],
				f[24];
	const char *p[4] = {t, f, error_json ? error_json : "{}", retryable ? "true" : "false"};

	snprintf(t, sizeof(t), "%" PRId64, task_id);
	snprintf(f, sizeof(f), "%" PRId64, fence);
	return answer_of(conn, "SELECT wf.fail_task($1::bigint, $2::bigint, $3::jsonb, $4::boolean)",
					 4, p, err);
}

/*
 * the rows of wf.complete_and_claim / wf.fail_and_claim: the answer of the
 * first row, the leases as *tasks (*ntasks of them)
 */
static WfAnswer
answer_and_tasks(PGresult *res, WfTask ***tasks, int *ntasks)
{
	WfAnswer	a;

	*tasks = NULL;
	*ntasks = 0;
	if (res == NULL)
		return WF_ANSWER_ERROR;
	a = PQntuples(res) >= 1 ? parse_answer(PQgetvalue(res, 0, 0)) : WF_ANSWER_ERROR;
	*ntasks = tasks_from(res, 1, tasks);
	PQclear(res);
	return a;
}

/*
 * the report of wf.complete_and_claim, or of wf.fail_and_claim when
 * retryable is not NULL ("true"/"false"), with the leases it hands out
 */
static WfAnswer
report_and_claim(PGconn *conn, int64_t task_id, int64_t fence, const char *json,
				 const char *retryable, const char *queue, const char *worker, int max_tasks,
				 double lease, WfTask ***tasks, int *ntasks, WfError *err)
{
	char		t[24],
				f[24],
				maxs[16],
				leases[48];
	const char *p[8];
	int			n = 0;

	snprintf(t, sizeof(t), "%" PRId64, task_id);
	snprintf(f, sizeof(f), "%" PRId64, fence);
	snprintf(maxs, sizeof(maxs), "%d", max_tasks);
	snprintf(leases, sizeof(leases), "%.3f seconds", lease);
	p[n++] = t;
	p[n++] = f;
	p[n++] = json ? json : "{}";
	if (retryable)
		p[n++] = retryable;
	p[n++] = queue;
	p[n++] = worker;
	p[n++] = maxs;
	p[n++] = leases;
	return answer_and_tasks(exec(conn, retryable ?
								 "SELECT answer, " CLAIM_COLUMNS " FROM wf.fail_and_claim($1::bigint,"
								 " $2::bigint, $3::jsonb, $4::boolean, $5, $6, $7::integer, $8::interval)" :
								 "SELECT answer, " CLAIM_COLUMNS " FROM wf.complete_and_claim($1::bigint,"
								 " $2::bigint, $3::jsonb, $4, $5, $6::integer, $7::interval)",
								 n, p, err),
							tasks, ntasks);
}

WfAnswer
wf_complete_and_claim(PGconn *conn, int64_t task_id, int64_t fence, const char *output_json,
					  const char *queue, const char *worker, int max_tasks, double lease,
					  WfTask ***tasks, int *ntasks, WfError *err)
{
	return report_and_claim(conn, task_id, fence, output_json, NULL, queue, worker, max_tasks,
							lease, tasks, ntasks, err);
}

WfAnswer
wf_fail_and_claim(PGconn *conn, int64_t task_id, int64_t fence, const char *error_json,
				  int retryable, const char *queue, const char *worker, int max_tasks,
				  double lease, WfTask ***tasks, int *ntasks, WfError *err)
{
	return report_and_claim(conn, task_id, fence, error_json, retryable ? "true" : "false",
							queue, worker, max_tasks, lease, tasks, ntasks, err);
}

WfAnswer
wf_heartbeat(PGconn *conn, int64_t task_id, int64_t fence, WfError *err)
{
	char		t[24],
				f[24];
	const char *p[2] = {t, f};

	snprintf(t, sizeof(t), "%" PRId64, task_id);
	snprintf(f, sizeof(f), "%" PRId64, fence);
	return answer_of(conn, "SELECT wf.heartbeat($1::bigint, $2::bigint)", 2, p, err);
}

/* ---- the worker loop ---- */

typedef struct Worker
{
	WfWorkerConfig config;		/* with the defaults filled in */
	const WfWorkerConfig *cfg;	/* = &config */
	char		name[128];
	pthread_mutex_t lock;
	pthread_cond_t changed;		/* a task was queued, or one finished */
	WfTask	  **in_flight;		/* [concurrency]: claimed, not reported */
	int			n_in_flight;
	WfTask	  **todo;			/* [concurrency]: claimed, not started */
	int			n_todo;
	int			threads_done;	/* task threads that returned */
	int			n_reporting;	/* task threads inside report() */
	int			abandoned;		/* the drain timed out: no more reports */
	int			beat_stop;
	int			eager;			/* report with wf.complete_and_claim */
	int			nshards;		/* of cfg->shards; 0: cfg->conninfo */
	int			generation;		/* one more at each move to another shard */
	WfWorkerStats stats;
} Worker;

static volatile sig_atomic_t stopping = 0;
static PGcancel *volatile claim_cancel = NULL;

void
wf_worker_stop(void)
{
	char		buf[256];
	PGcancel   *c = claim_cancel;

	stopping = 1;
	if (c != NULL)
		(void) PQcancel(c, buf, sizeof(buf));
}

static void
on_signal(int signo)
{
	(void) signo;
	wf_worker_stop();
}

static PGconn *
connect_to(const char *conninfo, WfError *err)
{
	PGconn	   *conn = PQconnectdb(conninfo ? conninfo : "");

	if (PQstatus(conn) != CONNECTION_OK)
	{
		set_error(err, conn, NULL);
		PQfinish(conn);
		return NULL;
	}
	return conn;
}

/* ---- shards ---- */

/* the connection string of the shard of generation gen */
static const char *
shard_conninfo(const Worker *w, int gen)
{
	if (w->nshards == 0)
		return w->cfg->conninfo;
	return w->cfg->shards[gen % w->nshards];
}

static int
current_gen(Worker *w)
{
	int			gen;

	pthread_mutex_lock(&w->lock);
	gen = w->generation;
	pthread_mutex_unlock(&w->lock);
	return gen;
}

/*
 * moves_on: err moves a worker with a shard list to the next shard: a call
 * refused with 55W01, or a connection not made or lost (no SQLSTATE, class
 * 08, 57P01).  Never with one connection string.
 */
static int
moves_on(const Worker *w, const WfError *err)
{
	if (w->nshards < 2)
		return 0;
	return err->sqlstate[0] == '\0' || strcmp(err->sqlstate, "55W01") == 0 ||
		strcmp(err->sqlstate, "57P01") == 0 || strncmp(err->sqlstate, "08", 2) == 0;
}

/*
 * move_shard moves to the next shard, unless another thread already moved
 * on from generation gen (one move per failure, however many threads see
 * it).  Connections made under an older generation are made again.
 */
static void
move_shard(Worker *w, int gen, const WfError *why)
{
	pthread_mutex_lock(&w->lock);
	if (gen == w->generation)
	{
		w->generation++;
		w->stats.moves++;
		w->stats.shard = w->generation % w->nshards;
		fprintf(stderr, "wfworker: moving from shard %d to shard %d (%s %s)\n",
				gen % w->nshards, w->stats.shard, why->sqlstate,
				why->message ? why->message : "");
	}
	pthread_mutex_unlock(&w->lock);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
wait_on(Worker *w, double seconds)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t) seconds;
	ts.tv_nsec += (long) ((seconds - (time_t) seconds) * 1e9);
	if (ts.tv_nsec >= 1000000000L)
	{
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&w->changed, &w->lock, &ts);
}

/*
 * reports one task's result; a lost connection is reconnected and tried
 * again.  With eager (wf.complete_and_claim / wf.fail_and_claim) *next is
 * set to the task the report leased to this thread, or NULL; a lease handed
 * out with an answer lost to a broken connection is never seen here, it
 * expires and the attempt is delivered again.
 */
static WfAnswer
report(Worker *w, PGconn **conn, int *conn_gen, WfTask *t, WfResult r, int eager, WfTask **next)
{
	WfError		err = WF_ERROR_INIT;
	WfAnswer	a = WF_ANSWER_ERROR;
	int			i;
	int			lost = 0;

	*next = NULL;

	/*
	 * With a shard list, a report refused with 55W01 or whose connection
	 * fails moves the worker to the next shard and is made there (answered
	 * stale there after a real move).
	 */
	for (i = 0; i < 30; i++)
	{
		int			gen = current_gen(w);

		if (*conn != NULL && *conn_gen != gen)
		{
			PQfinish(*conn);	/* made on a shard the worker moved away from */
			*conn = NULL;
		}
		if (*conn == NULL || PQstatus(*conn) != CONNECTION_OK)
		{
			if (w->nshards < 2 && ++lost > 3)
				break;
			PQfinish(*conn);
			wf_error_clear(&err);
			*conn = connect_to(shard_conninfo(w, gen), &err);
			*conn_gen = gen;
			if (*conn == NULL)
			{
				if (moves_on(w, &err))
				{
					move_shard(w, gen, &err);
					if (i + 1 >= w->nshards)
						usleep(100000 * (i < 9 ? i + 1 : 10));	/* all the way round */
				}
				else
					usleep(200000 * lost);
				continue;
			}
		}
		if (eager)
		{
			WfTask	  **leased;
			int			n,
						k;

			a = r.failed ? wf_fail_and_claim(*conn, t->task_id, t->fence, r.json, !r.non_retryable,
											 t->queue, w->name, 1, w->cfg->lease, &leased, &n, &err)
				: wf_complete_and_claim(*conn, t->task_id, t->fence, r.json, t->queue, w->name, 1,
										w->cfg->lease, &leased, &n, &err);
			for (k = 0; k < n; k++)
			{
				if (k == 0)
					*next = leased[0];
				else
					wf_task_free(leased[k]);	/* not asked for: max_tasks 1 */
			}
			free(leased);
		}
		else
			a = r.failed ? wf_fail(*conn, t->task_id, t->fence, r.json, !r.non_retryable, &err)
				: wf_complete(*conn, t->task_id, t->fence, r.json, &err);
		if (a == WF_ANSWER_ERROR && moves_on(w, &err) && i < 29)
		{
			fprintf(stderr, "wfworker: task %" PRId64 ": report failed on this shard (%s), moving on\n",
					t->task_id, err.sqlstate);
			move_shard(w, *conn_gen, &err);
			wf_error_clear(&err);
			if (i + 1 >= w->nshards)
				usleep(100000 * (i < 9 ? i + 1 : 10));	/* all the way round */
			continue;
		}
		if (a == WF_ANSWER_ERROR && wf_error_retryable(&err) && i < 29)
		{
			/* a move's cut-over: report again (after it the fence is stale) */
			fprintf(stderr, "wfworker: task %" PRId64 ": report refused (%s), retrying\n",
					t->task_id, err.sqlstate);
			wf_error_clear(&err);
			usleep(100000 * (i < 9 ? i + 1 : 10));
			continue;
		}
		if (a != WF_ANSWER_ERROR || err.sqlstate[0] != '\0')
			break;				/* an answer, or an error of the server */
	}
	if (a == WF_ANSWER_ERROR)
		fprintf(stderr, "wfworker: task %" PRId64 ": report failed: %s %s%s%s\n", t->task_id,
				err.sqlstate, err.message ? err.message : "",
				err.hint ? " HINT: " : "", err.hint ? err.hint : "");
	wf_error_clear(&err);
	return a;
}

int
wf_error_retryable(const WfError *err)
{
	static const char *const codes[] = {"40001", "40P01", "55P03", "55W01", "57P01"};

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(err->sqlstate, codes[i]) == 0)
			return 1;
	return strncmp(err->sqlstate, "08", 2) == 0;
}

/* ---- handlers and their results ---- */

WfResult
wf_ok(char *json)
{
	WfResult	r = {.failed = 0, .json = json};

	return r;
}

WfResult
wf_failure(char *json)
{
	WfResult	r = {.failed = 1, .json = json};

	return r;
}

WfResult
wf_failure_permanent(char *json)
{
	WfResult	r = {.failed = 1, .json = json, .non_retryable = 1};

	return r;
}

/* appends s to buf (of size cap, NUL-terminated) as a JSON string literal */
static void
json_quote(char *buf, size_t cap, const char *s)
{
	size_t		n = strlen(buf);

	if (n + 1 < cap)
		buf[n++] = '"';
	for (; *s && n + 8 < cap; s++)
	{
		unsigned char c = (unsigned char) *s;

		if (c == '"' || c == '\\')
		{
			buf[n++] = '\\';
			buf[n++] = c;
		}
		else if (c < 0x20)
			n += snprintf(buf + n, cap - n, "\\u%04x", c);
		else
			buf[n++] = c;
	}
	if (n + 1 < cap)
		buf[n++] = '"';
	buf[n] = '\0';
}

/* a failure with {"code": <code>, "message": <message>} */
static WfResult
coded_failure(const char *code, const char *message, int non_retryable)
{
	size_t		cap = strlen(code) + 6 * strlen(message ? message : "") + 64;
	char	   *j = malloc(cap);
	WfResult	r = {.failed = 1, .json = j, .non_retryable = non_retryable};

	if (j == NULL)
		return r;				/* reported as {} */
	strcpy(j, "{\"code\": ");
	json_quote(j, cap, code);
	strcat(j, ", \"message\": ");
	json_quote(j, cap, message ? message : "");
	strcat(j, "}");
	return r;
}

WfResult
wf_exception(const char *message)
{
	return coded_failure("exception", message, 0);
}

/*
 * runs the handler of t: the entry of cfg->handlers for its activity (for
 * its queue when the step has none), else the catch-all cfg->handler, else
 * a failure "unknown_activity" that is not retryable (no attempt will find
 * a handler).  A failure without JSON is the code "exception", retryable
 * unless it says otherwise.
 */
static WfResult
run_handler(const WfWorkerConfig *cfg, const WfTask *t)
{
	const char *key = t->activity ? t->activity : t->queue;
	const WfHandlerEntry *e;
	WfResult	r;

	for (e = cfg->handlers; e != NULL && e->activity != NULL; e++)
		if (strcmp(e->activity, key) == 0 && e->handler != NULL)
			break;
	if (e != NULL && e->activity != NULL)
		r = e->handler(t, e->arg);
	else if (cfg->handler != NULL)
		r = cfg->handler(t, cfg->arg);
	else
	{
		char		msg[300];

		snprintf(msg, sizeof(msg), "no handler for %.256s", key);
		return coded_failure("unknown_activity", msg, 1);
	}
	if (r.failed && r.json == NULL)
		r.json = coded_failure("exception", "the handler failed without an error", 0).json;
	return r;
}

static void *
task_thread(void *arg)
{
	Worker	   *w = arg;
	PGconn	   *conn = NULL;
	int			conn_gen = 0;

	prepare_calls = !w->cfg->no_prepare;
	pthread_mutex_lock(&w->lock);
	for (;;)
	{
		WfTask	   *t;
		WfResult	r;
		WfAnswer	a;
		int			i;

		while (w->n_todo == 0 && !stopping)
			wait_on(w, 0.2);
		if (w->n_todo == 0 || w->abandoned)
			break;				/* stopping, and nothing left to start */
		t = w->todo[--w->n_todo];
		/*
		 * With eager dispatch a report may lease the next task (the next
		 * step of the same run first): the thread keeps the slot and runs
		 * it at once.  Nothing is leased so once the worker is stopping.
		 */
		while (t != NULL)
		{
			WfTask	   *next;

			pthread_mutex_unlock(&w->lock);
			r = run_handler(w->cfg, t);

			/*
			 * A task the drain gave up on is left to its lease: no report,
			 * and no libpq at all, since wf_worker_run has returned and the
			 * process may be exiting (a connection opened or used during
			 * exit() crashed it).  The drain waits for reports begun before.
			 */
			pthread_mutex_lock(&w->lock);
			if (w->abandoned)
			{
				free(r.json);
				break;
			}
			w->n_reporting++;
			pthread_mutex_unlock(&w->lock);
			/* stopping is looked at after the handler: a stop may come meanwhile */
			a = report(w, &conn, &conn_gen, t, r, w->eager && !stopping, &next);
			free(r.json);

			pthread_mutex_lock(&w->lock);
			w->n_reporting--;
			if (a == WF_ANSWER_ACCEPTED)
				w->stats.accepted++;
			else
				w->stats.not_accepted++;
			if (a == WF_ANSWER_STALE)
				w->stats.stale++;
			for (i = 0; i < w->n_in_flight; i++)
				if (w->in_flight[i] == t)
				{
					if (next != NULL)
						w->in_flight[i] = next; /* the same slot */
					else
						w->in_flight[i] = w->in_flight[--w->n_in_flight];
					break;
				}
			if (next != NULL)
				w->stats.handed_on++;
			wf_task_free(t);
			t = next;
			pthread_cond_broadcast(&w->changed);
		}
	}
	w->threads_done++;
	pthread_cond_broadcast(&w->changed);
	if (w->abandoned)
	{
		/* the process may be exiting: its connection is left to it */
		pthread_mutex_unlock(&w->lock);
		return NULL;
	}
	pthread_mutex_unlock(&w->lock);
	PQfinish(conn);
	return NULL;
}

/* renews the leases of every task in flight, in one statement per round */
static void *
heartbeat_thread(void *arg)
{
	Worker	   *w = arg;
	PGconn	   *conn = NULL;
	int			conn_gen = 0;
	size_t		cap = (size_t) w->cfg->concurrency * 24 + 3;
	char	   *ids = malloc(cap),
			   *fences = malloc(cap);

	prepare_calls = !w->cfg->no_prepare;
	pthread_mutex_lock(&w->lock);
	while (!w->beat_stop)
	{
		int			i;
		size_t		li = 0,
					lf = 0;
		PGresult   *res;
		WfError		err = WF_ERROR_INIT;
		const char *p[2] = {ids, fences};

		wait_on(w, w->cfg->heartbeat);
		if (w->beat_stop || w->n_in_flight == 0)
			continue;
		li += snprintf(ids + li, cap - li, "{");
		lf += snprintf(fences + lf, cap - lf, "{");
		for (i = 0; i < w->n_in_flight; i++)
		{
			li += snprintf(ids + li, cap - li, "%s%" PRId64, i ? "," : "", w->in_flight[i]->task_id);
			lf += snprintf(fences + lf, cap - lf, "%s%" PRId64, i ? "," : "", w->in_flight[i]->fence);
		}
		snprintf(ids + li, cap - li, "}");
		snprintf(fences + lf, cap - lf, "}");
		pthread_mutex_unlock(&w->lock);

		if (conn == NULL || PQstatus(conn) != CONNECTION_OK || conn_gen != current_gen(w))
		{
			PQfinish(conn);
			conn_gen = current_gen(w);
			conn = connect_to(shard_conninfo(w, conn_gen), &err);
		}
		res = conn ? exec(conn, "SELECT u.t, wf.heartbeat(u.t, u.f)"
						  " FROM unnest($1::bigint[], $2::bigint[]) AS u(t, f)", 2, p, &err) : NULL;
		if (res == NULL)
		{
			fprintf(stderr, "wfworker: heartbeat failed: %s %s\n", err.sqlstate,
					err.message ? err.message : "");
			if (moves_on(w, &err))
				move_shard(w, conn_gen, &err);
		}
		wf_error_clear(&err);

		pthread_mutex_lock(&w->lock);
		for (i = 0; res != NULL && i < PQntuples(res); i++)
		{
			int64_t		id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
			WfAnswer	a = parse_answer(PQgetvalue(res, i, 1));
			int			j;

			if (a != WF_ANSWER_STALE && a != WF_ANSWER_CANCEL_REQUESTED)
				continue;
			for (j = 0; j < w->n_in_flight; j++)
				if (w->in_flight[j]->task_id == id)
					w->in_flight[j]->cancelled = 1;
		}
		PQclear(res);
	}
	pthread_mutex_unlock(&w->lock);
	PQfinish(conn);
	free(ids);
	free(fences);
	return NULL;
}

/* LISTEN on the queues' channels (the claim of a server without wf.claim_tasks_any) */
static int
listen_all(PGconn *conn, const WfWorkerConfig *cfg, WfError *err)
{
	int			i;

	for (i = 0; i < cfg->nqueues; i++)
	{
		const char *p[1] = {cfg->queues[i]};
		PGresult   *res = exec(conn, "SELECT wf.channel('queue', $1)", 1, p, err);
		char	   *id,
				   *sql;

		if (res == NULL)
			return -1;
		id = PQescapeIdentifier(conn, PQgetvalue(res, 0, 0), strlen(PQgetvalue(res, 0, 0)));
		sql = malloc(strlen(id) + 8);
		sprintf(sql, "LISTEN %s", id);
		PQclear(res);
		res = PQexec(conn, sql);
		PQfreemem(id);
		free(sql);
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			set_error(err, conn, res);
			PQclear(res);
			return -1;
		}
		PQclear(res);
	}
	return 0;
}

/* one claim of up to free tasks; -1 on an error (err filled) */
static int
claim_round(Worker *w, PGconn *conn, int free_slots, int has_any, WfTask ***tasks, WfError *err)
{
	const WfWorkerConfig *cfg = w->cfg;
	int			n = 0,
				i;
	double		end;

	if (cfg->nqueues == 1)
		return wf_claim(conn, cfg->queues[0], w->name, free_slots, cfg->lease, cfg->wait,
						tasks, err);
	if (has_any)
		return wf_claim_any(conn, cfg->queues, cfg->nqueues, w->name, free_slots, cfg->lease,
							cfg->wait, tasks, err);
	*tasks = calloc(free_slots, sizeof(WfTask *));
	for (i = 0; i < cfg->nqueues && n < free_slots; i++)
	{
		WfTask	  **got;
		int			k = wf_claim(conn, cfg->queues[i], w->name, free_slots - n, cfg->lease, 0,
								 &got, err);

		if (k < 0)
		{
			free(*tasks);
			return -1;
		}
		memcpy(*tasks + n, got, k * sizeof(WfTask *));
		n += k;
		free(got);
	}
	if (n > 0)
		return n;
	/* until a notification, the end of the wait or a stop (in short steps) */
	end = now_s() + cfg->wait;
	while (!stopping && now_s() < end)
	{
		fd_set		fds;
		struct timeval tv = {0, 250000};
		PGnotify   *nf;
		int			got = 0;

		FD_ZERO(&fds);
		FD_SET(PQsocket(conn), &fds);
		if (select(PQsocket(conn) + 1, &fds, NULL, NULL, &tv) > 0)
		{
			PQconsumeInput(conn);
			while ((nf = PQnotifies(conn)) != NULL)
			{
				PQfreemem(nf);
				got = 1;
			}
			if (got || PQstatus(conn) != CONNECTION_OK)
				break;
		}
	}
	return 0;
}

int
wf_worker_run(const WfWorkerConfig *in, WfWorkerStats *stats, WfError *err)
{
	Worker	   *w = calloc(1, sizeof(Worker));
	WfWorkerConfig cfg = *in;
	PGcancel   *cancel;
	PGconn	   *conn;
	pthread_t  *threads,
				beat;
	struct sigaction sa,
				old_term,
				old_int;
	int			has_any = 0,
				i,
				listening = 0;
	double		deadline;
	PGresult   *res;
	int			claim_gen = 0,
				k,
				failed_moves = 0,
				saved_prepare;

	if ((cfg.handlers == NULL || cfg.handlers[0].activity == NULL) && cfg.handler == NULL)
	{
		free(w);
		wf_error_clear(err);
		err->message = strdup("a worker needs a handler: set cfg.handlers, cfg.handler or both");
		return -1;
	}
	if (cfg.concurrency < 1)
		cfg.concurrency = 4;
	if (cfg.lease <= 0)
		cfg.lease = 30;
	if (cfg.wait <= 0)
		cfg.wait = 10;
	if (cfg.heartbeat <= 0)
		cfg.heartbeat = cfg.lease / 3;
	if (cfg.drain_timeout <= 0)
		cfg.drain_timeout = cfg.lease;
	w->config = cfg;
	w->cfg = &w->config;
	if (cfg.name)
		snprintf(w->name, sizeof(w->name), "%s", cfg.name);
	else
	{
		char		host[64] = "worker";

		gethostname(host, sizeof(host) - 1);
		snprintf(w->name, sizeof(w->name), "%s-%d", host, (int) getpid());
	}

	while (cfg.shards != NULL && cfg.shards[w->nshards] != NULL)
		w->nshards++;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->changed, NULL);

	/* with a shard list, the first shard that answers */
	for (k = 0;; k++)
	{
		conn = connect_to(shard_conninfo(w, w->generation), err);
		if (conn != NULL || k + 1 >= w->nshards)
			break;
		move_shard(w, w->generation, err);
		wf_error_clear(err);
	}
	if (conn == NULL)
	{
		pthread_cond_destroy(&w->changed);
		pthread_mutex_destroy(&w->lock);
		free(w);
		return -1;
	}
	claim_gen = w->generation;
	res = PQexec(conn, "SELECT pg_catalog.to_regprocedure("
				 "'wf.claim_tasks_any(text[],text,integer,interval,interval)') IS NOT NULL");
	has_any = PQresultStatus(res) == PGRES_TUPLES_OK && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!cfg.no_eager)
	{
		res = PQexec(conn, "SELECT pg_catalog.to_regprocedure("
					 "'wf.complete_and_claim(bigint,bigint,jsonb,text,text,integer,interval)') IS NOT NULL");
		w->eager = PQresultStatus(res) == PGRES_TUPLES_OK && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
		PQclear(res);
	}

	w->in_flight = calloc(cfg.concurrency, sizeof(WfTask *));
	w->todo = calloc(cfg.concurrency, sizeof(WfTask *));
	threads = calloc(cfg.concurrency, sizeof(pthread_t));

	stopping = 0;
	cancel = PQgetCancel(conn);
	claim_cancel = cancel;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGINT, &sa, &old_int);

	for (i = 0; i < cfg.concurrency; i++)
		pthread_create(&threads[i], NULL, task_thread, w);
	pthread_create(&beat, NULL, heartbeat_thread, w);

	saved_prepare = wf_prepare_calls(!cfg.no_prepare);
	while (!stopping)
	{
		int			free_slots,
					n;
		WfTask	  **tasks = NULL;
		WfError		cerr = WF_ERROR_INIT;

		pthread_mutex_lock(&w->lock);
		while (w->n_in_flight >= cfg.concurrency && !stopping)
			wait_on(w, 0.2);
		free_slots = cfg.concurrency - w->n_in_flight;
		pthread_mutex_unlock(&w->lock);
		if (stopping)
			break;
		if (w->nshards > 1 && (conn == NULL || claim_gen != current_gen(w)))
		{
			/* the worker moved to another shard: claim there */
			claim_cancel = NULL;
			PQfreeCancel(cancel);
			cancel = NULL;
			PQfinish(conn);
			claim_gen = current_gen(w);
			conn = connect_to(shard_conninfo(w, claim_gen), &cerr);
			listening = 0;
			if (conn == NULL)
			{
				fprintf(stderr, "wfworker: claim failed: %s\n", cerr.message ? cerr.message : "");
				move_shard(w, claim_gen, &cerr);
				wf_error_clear(&cerr);
				if (++failed_moves >= w->nshards)
					usleep(200000); /* all the way round */
				continue;
			}
			cancel = PQgetCancel(conn);
			claim_cancel = cancel;
			if (stopping)
				break;
		}
		if (cfg.nqueues > 1 && !has_any && !listening)
		{
			if (listen_all(conn, &cfg, &cerr) < 0)
				fprintf(stderr, "wfworker: LISTEN failed: %s\n", cerr.message);
			listening = 1;
		}
		n = claim_round(w, conn, free_slots, has_any, &tasks, &cerr);
		if (n < 0)
		{
			if (!stopping && moves_on(w, &cerr))
			{
				/* another shard's tenant, or a shard down: the next shard */
				fprintf(stderr, "wfworker: claim failed: %s %s\n", cerr.sqlstate,
						cerr.message ? cerr.message : "");
				move_shard(w, claim_gen, &cerr);
				if (++failed_moves >= w->nshards)
					usleep(200000); /* all the way round */
			}
			else if (!stopping)
			{
				fprintf(stderr, "wfworker: claim failed: %s %s\n", cerr.sqlstate,
						cerr.message ? cerr.message : "");
				if (PQstatus(conn) != CONNECTION_OK)
					PQreset(conn);
				/* a move's cut-over is over soon; anything else: a second */
				usleep(wf_error_retryable(&cerr) ? 200000 : 1000000);
			}
			wf_error_clear(&cerr);
			continue;
		}
		failed_moves = 0;
		pthread_mutex_lock(&w->lock);
		for (i = 0; i < n; i++)
		{
			w->in_flight[w->n_in_flight++] = tasks[i];
			w->todo[w->n_todo++] = tasks[i];
		}
		w->stats.claimed += n;
		if (w->n_in_flight > w->stats.max_in_flight)
			w->stats.max_in_flight = w->n_in_flight;
		pthread_cond_broadcast(&w->changed);
		pthread_mutex_unlock(&w->lock);
		free(tasks);
	}

	(void) wf_prepare_calls(saved_prepare);

	/* graceful shutdown: the tasks in flight finish, heartbeaten */
	claim_cancel = NULL;
	deadline = now_s() + cfg.drain_timeout;
	pthread_mutex_lock(&w->lock);
	pthread_cond_broadcast(&w->changed);
	while (w->n_in_flight > 0 && now_s() < deadline)
		wait_on(w, 0.1);
	for (i = 0; i < w->n_in_flight; i++)
		w->in_flight[i]->cancelled = 1;
	w->stats.abandoned = w->n_in_flight;
	w->abandoned = w->n_in_flight > 0;
	w->beat_stop = 1;
	pthread_cond_broadcast(&w->changed);
	/* a report under way finishes (one statement) before the threads are left */
	while (w->n_reporting > 0)
		wait_on(w, 0.1);
	pthread_mutex_unlock(&w->lock);
	pthread_join(beat, NULL);
	if (w->stats.abandoned == 0)
		for (i = 0; i < cfg.concurrency; i++)
			pthread_join(threads[i], NULL);
	else
	{
		/* their leases will expire; the threads are left to the process */
		fprintf(stderr, "wfworker: %d task(s) still running at shutdown; their leases will expire\n",
				w->stats.abandoned);
		for (i = 0; i < cfg.concurrency; i++)
			pthread_detach(threads[i]);
	}

	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGINT, &old_int, NULL);
	PQfreeCancel(cancel);
	if (stats)
		*stats = w->stats;
	PQfinish(conn);
	free(threads);
	if (w->stats.abandoned == 0)
	{
		free(w->in_flight);
		free(w->todo);
		pthread_cond_destroy(&w->changed);
		pthread_mutex_destroy(&w->lock);
		free(w);
	}							/* else the detached threads still use w */
	return 0;
}
