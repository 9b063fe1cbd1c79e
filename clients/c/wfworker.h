/*
 * wfworker.h
 *	  A small worker library for wfengine in C (libpq, POSIX threads).
 *
 * Two layers:
 *   - the worker calls, typed, on a PGconn of the caller's: wf_claim,
 *     wf_complete, wf_fail, wf_complete_and_claim, wf_fail_and_claim,
 *     wf_heartbeat.  Each returns a WfAnswer and
 *     fills a WfError (SQLSTATE, message, detail, hint) on an error.
 *   - a worker loop, wf_worker_run: claims with a wait, runs a handler on
 *     up to `concurrency` threads, heartbeats the tasks in flight on a
 *     connection of its own, reports (with eager dispatch where the server
 *     has it: a report that leases the thread its next task of the same
 *     queue runs it at once), and shuts down gracefully on
 *     SIGTERM/SIGINT or wf_worker_stop().
 *
 * Shards: WfWorkerConfig.shards, a NULL-terminated array of the connection
 * strings of a sharded deployment's shards, is used instead of conninfo when
 * set.  The worker uses one shard at a time for all its connections; when a
 * call is refused with 55W01 (the shard map gives the worker's tenant to
 * another shard), or a connection cannot be made or is lost, it moves all
 * its connections to the next shard (round robin) and makes the call again
 * there.  A report there of a task leased on the old shard is answered stale
 * and the task dropped; the worker claims on.
 *
 * Inputs and outputs are JSON text: the library does not parse JSON.
 */
#ifndef WFWORKER_H
#define WFWORKER_H

#include <stdint.h>
#include <signal.h>

#include <libpq-fe.h>

/* the verdict on a report or heartbeat (docs/reference.md) */
typedef enum WfAnswer
{
	WF_ANSWER_ERROR = 0,		/* the call failed: see the WfError */
	WF_ANSWER_ACCEPTED,
	WF_ANSWER_DUPLICATE,
	WF_ANSWER_STALE,
	WF_ANSWER_CANCEL_REQUESTED,
	WF_ANSWER_OK				/* a heartbeat that renewed the lease */
} WfAnswer;

/* an error of the server (or of the connection: sqlstate "" ) */
typedef struct WfError
{
	char		sqlstate[6];
	char	   *message;		/* malloc'd; NULL when there is no error */
	char	   *detail;			/* malloc'd or NULL */
	char	   *hint;			/* malloc'd or NULL */
} WfError;

/*
 * wf_error_retryable: the call changed nothing and may be made again: a
 * serialization failure or deadlock, a lock not available, a partition
 * moving between shards (40001 through the router, 55W01 on a shard), a
 * shard that cannot be reached (class 08) or shutting down (57P01).
 */
int			wf_error_retryable(const WfError *err);

#define WF_ERROR_INIT {"", NULL, NULL, NULL}

/* one leased attempt, as wf.claim_tasks returns it */
typedef struct WfTask
{
	int64_t		task_id;
	int64_t		fence;
	int			attempt;
	int			deliveries;
	char	   *run_id;
	char	   *step;
	char	   *idempotency_key;
	char	   *input;			/* JSON text */
	char	   *queue;
	char	   *activity;		/* NULL when the step has none */
	char	   *lease_expires_at;
	volatile sig_atomic_t cancelled;	/* a heartbeat answered stale or
										 * cancel_requested: give up */
} WfTask;

/*
 * What a handler returns: an output to complete with, or an error to fail
 * with.  A failure is retryable unless it says otherwise: a zeroed WfResult
 * with failed = 1 lets the step's retry policy try again.  Build one with
 * the constructors below (or designated initializers); the field that was
 * `retryable` is now `non_retryable`, so old code that sets it fails to
 * compile instead of silently meaning the opposite.
 */
typedef struct WfResult
{
	int			failed;			/* 0: complete with json; 1: fail with json */
	char	   *json;			/* malloc'd JSON text, freed by the library: the
								 * output (NULL: {}), or the error (NULL: the
								 * code "exception") */
	int			non_retryable;	/* for a failure: 1 = final, retrying cannot help */
} WfResult;

/*
 * Constructors; each takes a malloc'd JSON text (the library frees it) or
 * NULL:
 *   wf_ok(json)                 complete with json (NULL: {})
 *   wf_failure(json)            fail, retryable: the step's retry policy decides
 *   wf_failure_permanent(json)  fail, not retryable: the step fails now
 *   wf_exception(message)       fail, retryable, with {"code": "exception",
 *                               "message": message} (message is copied, not
 *                               freed): C's form of a handler that "threw"
 * (wf_fail is the call that reports a failure, below.)
 */
extern WfResult wf_ok(char *json);
extern WfResult wf_failure(char *json);
extern WfResult wf_failure_permanent(char *json);
extern WfResult wf_exception(const char *message);

typedef WfResult (*WfHandler) (const WfTask *task, void *arg);

/*
 * One handler of a table: tasks of activity `activity` (of queue
 * `activity` for a step without one) go to handler(task, arg).  A table is
 * an array ended by an entry whose activity is NULL.
 */
typedef struct WfHandlerEntry
{
	const char *activity;
	WfHandler	handler;
	void	   *arg;
} WfHandlerEntry;

typedef struct WfWorkerConfig
{
	const char *conninfo;		/* libpq connection string ("" = environment) */
	const char *const *queues;
	int			nqueues;
	const WfHandlerEntry *handlers; /* by activity (by queue for a step without
									 * one), ended by {NULL}; */
	WfHandler	handler;		/* the catch-all: a task no entry matches (NULL:
								 * it fails with "unknown_activity", not
								 * retryable) */
	void	   *arg;			/* handler's arg */
	const char *name;			/* the worker's name (NULL: host-pid) */
	int			concurrency;	/* threads (default 4) */
	double		lease;			/* seconds (default 30) */
	double		wait;			/* seconds a claim waits (default 10) */
	double		heartbeat;		/* seconds between heartbeats (default lease/3) */
	double		drain_timeout;	/* seconds to finish at shutdown (default lease) */
	int			no_eager;		/* 1: report with wf_complete_task/wf_fail_task
								 * even where the server has eager dispatch
								 * (eager is on by default: a zeroed config
								 * has it, hence the negation) */
	const char *const *shards;	/* NULL-terminated shard connection strings,
								 * used instead of conninfo when set */
	int			no_prepare;		/* 1: the worker's calls as unnamed
								 * statements, for a pooler in transaction
								 * mode; by default each is prepared once per
								 * connection (a zeroed config prepares) */
} WfWorkerConfig;

/* counts of a worker's run, for tests and logs */
typedef struct WfWorkerStats
{
	int			claimed;
	int			accepted;		/* reports answered accepted */
	int			not_accepted;	/* duplicate, stale, cancel_requested or error */
	int			stale;			/* of those, reports answered stale */
	int			max_in_flight;
	int			abandoned;		/* still running at the end of the drain */
	int			handed_on;		/* tasks leased by a report (eager dispatch) */
	int			moves;			/* moves to another shard */
	int			shard;			/* the index in shards of the shard in use */
} WfWorkerStats;

extern void wf_error_clear(WfError *err);

/* the worker calls; conn must be in autocommit (no open transaction) */
extern int	wf_claim(PGconn *conn, const char *queue, const char *worker, int max_tasks,
					 double lease, double wait, WfTask ***tasks, WfError *err);
extern int	wf_claim_any(PGconn *conn, const char *const *queues, int nqueues,
						 const char *worker, int max_tasks, double lease, double wait,
						 WfTask ***tasks, WfError *err);
extern WfAnswer wf_complete(PGconn *conn, int64_t task_id, int64_t fence,
							const char *output_json, WfError *err);
extern WfAnswer wf_fail(PGconn *conn, int64_t task_id, int64_t fence,
						const char *error_json, int retryable, WfError *err);
/*
 * eager dispatch (wfengine 0.2.0): the report, then up to max_tasks new
 * leases of queue (the next step of the same run first) in *tasks (malloc'd,
 * *ntasks of them; free each with wf_task_free, then the array), in one call
 * and one commit
 */
extern WfAnswer wf_complete_and_claim(PGconn *conn, int64_t task_id, int64_t fence,
									  const char *output_json, const char *queue,
									  const char *worker, int max_tasks, double lease,
									  WfTask ***tasks, int *ntasks, WfError *err);
extern WfAnswer wf_fail_and_claim(PGconn *conn, int64_t task_id, int64_t fence,
								  const char *error_json, int retryable, const char *queue,
								  const char *worker, int max_tasks, double lease,
								  WfTask ***tasks, int *ntasks, WfError *err);
extern WfAnswer wf_heartbeat(PGconn *conn, int64_t task_id, int64_t fence, WfError *err);
/*
 * wf_prepare_calls: with on = 1 the typed calls made by this thread send
 * their statements prepared (once per connection, then only bound and
 * executed); with 0, as unnamed statements, for a pooler in transaction
 * mode.  Returns the thread's setting before.  A thread starts with 0; the
 * worker loop's threads prepare unless cfg.no_prepare.
 */
extern int	wf_prepare_calls(int on);
extern void wf_task_free(WfTask *task);
extern const char *wf_answer_name(WfAnswer a);

/*
 * wf_worker_run runs the loop until wf_worker_stop() or SIGTERM/SIGINT
 * (signal handlers installed for the call); returns 0, or -1 when it has no
 * handler (neither handlers nor handler) or could not connect (to any shard
 * of a list; err filled).  One worker per process at a time.
 */
extern int	wf_worker_run(const WfWorkerConfig *cfg, WfWorkerStats *stats, WfError *err);
extern void wf_worker_stop(void);	/* async-signal-safe */

#endif							/* WFWORKER_H */
