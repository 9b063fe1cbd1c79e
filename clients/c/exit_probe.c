/*
 * exit_probe.c
 *	  A worker of queue "exitprobe" for test/scripts/client_exit.sh (issue 32:
 *	  does the process stop on SIGTERM?).  Its handler holds each task
 *	  WF_PROBE_HOLD seconds, giving up (failing the attempt) when the library
 *	  marks the task cancelled; the drain timeout is WF_PROBE_DRAIN seconds.
 *	  Connects with the libpq environment; runs until SIGTERM.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wfworker.h"

static double
env_seconds(const char *name, double def)
{
	const char *v = getenv(name);

	return v && *v ? atof(v) : def;
}

/* holds the task WF_PROBE_HOLD seconds, in steps of 50 ms */
static WfResult
hold(const WfTask *task, void *arg)
{
	double		secs = *(double *) arg;
	struct timespec step = {0, 50 * 1000 * 1000};

	for (double t = 0; t < secs; t += 0.05)
	{
		if (task->cancelled)
			return wf_failure(strdup("{\"code\": \"cancelled\", \"message\": \"given up at shutdown\"}"));
		nanosleep(&step, NULL);
	}
	return wf_ok(strdup("{\"held\": true}"));
}

int
main(void)
{
	static const char *const queues[] = {"exitprobe"};
	double		secs = env_seconds("WF_PROBE_HOLD", 2);
	WfWorkerConfig cfg = {0};
	WfWorkerStats stats;
	WfError		err = WF_ERROR_INIT;

	cfg.conninfo = "";
	cfg.queues = queues;
	cfg.nqueues = 1;
	cfg.name = "exitprobe";
	cfg.concurrency = 2;
	cfg.lease = 30;
	cfg.wait = 10;
	cfg.drain_timeout = env_seconds("WF_PROBE_DRAIN", 5);
	cfg.handler = hold;
	cfg.arg = &secs;
	if (wf_worker_run(&cfg, &stats, &err) != 0)
	{
		fprintf(stderr, "exit_probe: %s\n", err.message ? err.message : "could not run");
		return 1;
	}
	return 0;
}
