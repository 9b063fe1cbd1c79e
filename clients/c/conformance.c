/*
 * conformance.c
 *	  This library's driver of the shared conformance scenario
 *	  (test/conformance/README.md): the scenario's handlers, written with the
 *	  public API, and a worker that runs until every run has ended.  Run by
 *	  test/conformance/run.sh, which publishes the definition, starts the
 *	  runs and compares their history with test/conformance/expected.txt.
 *	  Exit status 0 when the runs ended within 60 s.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wfworker.h"

static volatile int ended = 0;

/* {"handler": handler, "attempt": n}, malloc'd */
static char *
out(const char *handler, const WfTask *t)
{
	char	   *s = malloc(128);

	snprintf(s, 128, "{\"handler\": \"%s\", \"attempt\": %d}", handler, t->attempt);
	return s;
}

static WfResult
echo(const WfTask *t, void *arg)
{
	(void) arg;
	return wf_ok(out("echo", t));
}

/* by queue: a step without activity */
static WfResult
plain(const WfTask *t, void *arg)
{
	(void) arg;
	return wf_ok(out("plain", t));
}

static WfResult
flaky(const WfTask *t, void *arg)
{
	(void) arg;
	if (t->attempt == 1)		/* retryable: the default */
		return wf_failure(strdup("{\"code\": \"flaky\", \"message\": \"the first attempt fails\"}"));
	return wf_ok(out("flaky", t));
}

/* C has no exceptions: wf_exception is its form of a handler that throws */
static WfResult
throw(const WfTask *t, void *arg)
{
	(void) arg;
	if (t->attempt == 1)
		return wf_exception("the first attempt throws");
	return wf_ok(out("throw", t));
}

static WfResult
permanent(const WfTask *t, void *arg)
{
	(void) t;
	(void) arg;
	return wf_failure_permanent(strdup("{\"code\": \"permanent\", \"message\": \"retrying cannot help\"}"));
}

static WfResult
undo(const WfTask *t, void *arg)
{
	(void) arg;
	return wf_ok(out("undo", t));
}

static const WfHandlerEntry handlers[] = {
	{"conf_echo", echo, NULL},
	{"conf_plain", plain, NULL},
	{"conf_flaky", flaky, NULL},
	{"conf_throw", throw, NULL},
	{"conf_permanent", permanent, NULL},
	{"conf_undo", undo, NULL},
	{NULL, NULL, NULL}
};

/* wf_conformance_poll(): one tick, and whether every run has ended */
static void *
poll_runs(void *arg)
{
	PGconn	   *c = PQconnectdb("");
	int			i;

	(void) arg;
	for (i = 0; i < 600 && PQstatus(c) == CONNECTION_OK && !ended; i++)
	{
		PGresult   *r = PQexec(c, "SELECT wf_conformance_poll()");

		if (PQresultStatus(r) != PGRES_TUPLES_OK)
		{
			fprintf(stderr, "conformance: %s", PQerrorMessage(c));
			PQclear(r);
			break;
		}
		ended = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
		PQclear(r);
		if (!ended)
			usleep(100000);
	}
	PQfinish(c);
	wf_worker_stop();
	return NULL;
}

int
main(void)
{
	const char *queues[] = {"conf_main", "conf_plain"};
	WfWorkerConfig cfg = {.conninfo = "", .queues = queues, .nqueues = 2,
	.handlers = handlers, .name = "conformance-c", .lease = 30, .wait = 1};
	WfWorkerStats stats;
	WfError		err = WF_ERROR_INIT;
	pthread_t	poller;

	pthread_create(&poller, NULL, poll_runs, NULL);
	if (wf_worker_run(&cfg, &stats, &err) != 0)
	{
		fprintf(stderr, "conformance: %s %s\n", err.sqlstate, err.message);
		return 1;
	}
	pthread_join(poller, NULL);
	if (!ended)
		fprintf(stderr, "conformance: the runs did not end within 60 s\n");
	return ended ? 0 : 1;
}
