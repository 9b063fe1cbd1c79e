/*
 * example.c: a worker for the demo's order workflow (test/demo/order.json).
 *	  PGDATABASE=shop ./build/example        (stop with Ctrl-C or SIGTERM)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wfworker.h"

/* malloc'd JSON text: fmt with the task's idempotency key */
static char *
out(const char *fmt, const WfTask *t)
{
	char	   *s = malloc(512);

	snprintf(s, 512, fmt, t->idempotency_key);
	printf("task %lld %s#%d -> %s\n", (long long) t->task_id, t->step, t->attempt, s);
	return s;
}

static WfResult
charge_card(const WfTask *t, void *arg)
{
	(void) arg;
	return wf_ok(out("{\"charge_id\": \"ch_%s\", \"status\": \"captured\"}", t));
}

static WfResult
reserve_stock(const WfTask *t, void *arg)
{
	(void) arg;
	return wf_ok(out("{\"reservation_id\": \"rsv_%s\"}", t));
}

static WfResult
send_receipt(const WfTask *t, void *arg)
{
	(void) arg;
	return wf_ok(out("{\"message_id\": \"msg_%s@demo.invalid\"}", t));
}

/*
 * One handler per activity; a task of another activity fails with
 * "unknown_activity", not retryable (cfg.handler would be the catch-all).
 */
static const WfHandlerEntry handlers[] = {
	{"charge_card", charge_card, NULL},
	{"reserve_stock", reserve_stock, NULL},
	{"send_receipt", send_receipt, NULL},
	{NULL, NULL, NULL}
};

int
main(void)
{
	const char *queues[] = {"payments", "warehouse", "email"};
	WfWorkerConfig cfg = {.conninfo = "", .queues = queues, .nqueues = 3,
	.handlers = handlers, .concurrency = 4, .lease = 30, .wait = 10};
	WfWorkerStats stats;
	WfError		err = WF_ERROR_INIT;

	if (wf_worker_run(&cfg, &stats, &err) != 0)
	{
		fprintf(stderr, "example: %s %s\n", err.sqlstate, err.message);
		return 1;
	}
	printf("stopped: %d claimed, %d accepted\n", stats.claimed, stats.accepted);
	return 0;
}
