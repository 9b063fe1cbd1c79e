/*
 * example.c: a worker for the demo's order workflow (test/demo/order.json).
 *	  PGDATABASE=shop ./build/example        (stop with Ctrl-C or SIGTERM)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wfworker.h"

static WfResult
handle(const WfTask *t, void *arg)
{
	WfResult	r = {0, 0, NULL};
	const char *act = t->activity ? t->activity : t->queue;
	char	   *out = malloc(512);

	(void) arg;
	if (strcmp(act, "charge_card") == 0)
		snprintf(out, 512, "{\"charge_id\": \"ch_%s\", \"status\": \"captured\"}", t->idempotency_key);
	else if (strcmp(act, "reserve_stock") == 0)
		snprintf(out, 512, "{\"reservation_id\": \"rsv_%s\"}", t->idempotency_key);
	else if (strcmp(act, "send_receipt") == 0)
		snprintf(out, 512, "{\"message_id\": \"msg_%lld@demo.invalid\"}", (long long) t->task_id);
	else
	{
		r.failed = 1;			/* not retryable: no handler will know it */
		snprintf(out, 512, "{\"code\": \"unknown_activity\"}");
	}
	printf("task %lld %s#%d -> %s\n", (long long) t->task_id, t->step, t->attempt, out);
	r.json = out;
	return r;
}

int
main(void)
{
	const char *queues[] = {"payments", "warehouse", "email"};
	WfWorkerConfig cfg = {.conninfo = "", .queues = queues, .nqueues = 3,
	.concurrency = 4, .lease = 30, .wait = 10, .handler = handle};
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
