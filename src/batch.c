/*-------------------------------------------------------------------------
 *
 * batch.c
 *	  Batches and eager dispatch: many results, or many starts, in one
 *	  statement; results and the next claim in one call.
 *
 * A worker that keeps working pays, with wf.claim_tasks and
 * wf.complete_task, two round trips and two commits per step.  The entry
 * points of this file let it pay one of each:
 *
 *	 wf.complete_and_claim, wf.fail_and_claim
 *		report one result exactly as wf.complete_task or wf.fail_task does
 *		(same checks, same verdict, same errors), then lease up to
 *		max_tasks attempts of a queue to the same worker, without waiting,
 *		in the same transaction.  When the report's transition scheduled
 *		the next step of the same run on that queue, that attempt comes
 *		first: the transition inserts it already leased to this worker
 *		(runstore.c's lease offer, WfLeaseOffer), one row version and no
 *		claim; for a tenant with max_tasks_in_flight it is inserted
 *		ready and leased by its id (claim.c's claim_continuation),
 *		counted against the limit.  Either way no other transaction can
 *		see the row yet, so there is nothing to skip.  The rest come from
 *		the ordinary claim (FOR UPDATE SKIP LOCKED, claim order).  A run a worker has just
 *		advanced thus keeps going on that worker ("continuation first"),
 *		ahead of older or higher-priority attempts of the queue.  The claim
 *		never waits: waiting would hold the report's row locks and delay
 *		its commit, and so the next step of every run it touched.  A
 *		retry is not a continuation: it waits for its backoff timer
 *		(wf.tick); a failure continues at once only where it schedules
 *		another task (a catch, a compensation).
 *
 *	 wf.complete_tasks, wf.fail_tasks
 *		report many results in one statement (one commit), each as its
 *		own transition, exactly what the single call does (the same events,
 *		hash chain and snapshot; result.c's one report path).  A result
 *		that does not win gets its verdict (duplicate, stale) as in the
 *		single call; an unknown task or a fence never issued for it, which
 *		the single call refuses with an error, gets the verdict
 *		unknown_task or unknown_fence and changes nothing, so that one bad
 *		element does not fail the batch.  Malformed input (arrays of
 *		different lengths, NULL elements, more than WF_MAX_BATCH elements,
 *		payloads the single call refuses) is an error of the whole batch.
 *		The reports are applied in task id order (the order of the input
 *		among equal ids), so that two batches lock their task rows in the
 *		same order and cannot deadlock each other; the answers come back in
 *		the order of the input.
 *
 *	 wf.complete_tasks_and_claim, wf.fail_tasks_and_claim
 *		the two together, for a worker that works on many tasks at once and
 *		keeps working: one call and one commit per batch.  The batch is
 *		reported as wf.complete_tasks reports it, with the lease offered to
 *		the reports' transitions in the order they are applied until
 *		max_tasks of them have written their next attempt leased to the
 *		worker; then the claim, those continuations first, as after a single
 *		report.  The verdicts come back as one array in the order of the
 *		input, on every row.
 *
 *	 wf.start_runs
 *		wf.start_run for each input, in order, with its idempotency key:
 *		each element is the single call (it is called through fmgr), so
 *		a key repeated in the batch, or used before, returns the run it
 *		started, and an error (an unknown definition, a key used for a
 *		different run, a quota) fails the whole batch, naming the element.
 *
 * Every function here is an SQL entry point (layer 5): it checks its
 * arguments and calls the entry-point functions of result.c, claim.c and
 * run.c, which open their own API frames (a report and its claim inside
 * one frame of their own, so that the second does not pin the search_path
 * and check the installation again); it runs no SQL of its own.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/batch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "api.h"
#include "argcheck.h"
#include "batch.h"
#include "claim.h"
#include "result.h"
#include "rowwrite.h"
#include "spi_util.h"
#include "run.h"

PG_FUNCTION_INFO_V1(wfengine_complete_and_claim);
PG_FUNCTION_INFO_V1(wfengine_start_and_claim);
PG_FUNCTION_INFO_V1(wfengine_fail_and_claim);
PG_FUNCTION_INFO_V1(wfengine_complete_tasks);
PG_FUNCTION_INFO_V1(wfengine_fail_tasks);
PG_FUNCTION_INFO_V1(wfengine_complete_tasks_and_claim);
PG_FUNCTION_INFO_V1(wfengine_fail_tasks_and_claim);
PG_FUNCTION_INFO_V1(wfengine_start_runs);

/* one array argument, deconstructed */
typedef struct BatchArray
{
	const char *name;			/* the argument's name, in messages */
	Datum	   *elems;
	bool	   *nulls;
	int			n;
} BatchArray;

/* what the error context of a batch names: the element being applied */
typedef struct BatchContext
{
	const char *function;		/* "wf.complete_tasks" */
	const char *argname;		/* the array it counts in: "task_ids" */
	int			position;		/* 1-based position in it; 0: none yet */
	int64		task_id;		/* the element's task, 0: not a report */
} BatchContext;

/* the reports of a batch: its arrays, and what they report */
typedef struct BatchReports
{
	bool		is_failure;		/* errors (fail_tasks), not outputs */
	BatchArray	ids;
	BatchArray	fences;
	BatchArray	payloads;		/* the outputs, or the errors */
	BatchArray	retryables;		/* of failures */
} BatchReports;

/* one report of a batch, in the order they are applied */
typedef struct BatchReport
{
	int64		task_id;
	int			position;		/* 0-based, in the input */
} BatchReport;

/*
 * batch_error_context adds the element being applied to an error raised
 * while a batch applies it.
 */
static void
batch_error_context(void *arg)
{
	BatchContext *c = (BatchContext *) arg;

	if (c->position > 0 && c->task_id != 0)
		errcontext("%s, element %d of %s (task %lld)", c->function, c->position,
				   c->argname, (long long) c->task_id);
	else if (c->position > 0)
		errcontext("%s, element %d of %s", c->function, c->position, c->argname);
}

/*
 * batch_array deconstructs the array argument argno of element type
 * elemtype into a, named name: NULL (an error unless null_ok, and then an
 * array of n NULLs), or a one-dimensional array of at most WF_MAX_BATCH
 * elements, with no NULL unless nulls_ok.  n < 0: any length; otherwise
 * the array must have n elements (the first array's length), and a NULL
 * array stands for n NULL elements.
 */
static void
batch_array(FunctionCallInfo fcinfo, int argno, Oid elemtype, const char *name,
			bool null_ok, bool nulls_ok, int n, const char *first, BatchArray *a)
{
	ArrayType  *arr;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			i;

	a->name = name;
	if (PG_ARGISNULL(argno))
	{
		if (!null_ok || n < 0)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be null", name)));
		a->n = n;
		a->elems = palloc0(sizeof(Datum) * Max(n, 1));
		a->nulls = palloc(sizeof(bool) * Max(n, 1));
		for (i = 0; i < n; i++)
			a->nulls[i] = true;
		return;
	}
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array, not of %d dimensions",
						name, ARR_NDIM(arr))));
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(arr, elemtype, typlen, typbyval, typalign,
					  &a->elems, &a->nulls, &a->n);
	if (a->n > WF_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s has %d elements, more than the limit of %d of one batch",
						name, a->n, WF_MAX_BATCH),
				 errhint("Split the work into batches of at most %d.", WF_MAX_BATCH)));
	if (n >= 0 && a->n != n)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s has %d elements, but %s has %d", name, a->n, first, n),
				 errhint("Pass one element per element of %s, in the same order.", first)));
	if (!nulls_ok)
		for (i = 0; i < a->n; i++)
			if (a->nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("%s must not contain NULL", name),
						 errdetail("Element %d is NULL.", i + 1)));
}

/* ---- eager dispatch ---- */

/*
 * claim_request reads the claim arguments of wf.complete_and_claim and
 * wf.fail_and_claim, starting at argument first (queue, worker,
 * max_tasks, lease), and refuses what wf.claim_tasks refuses; a NULL is
 * an error here, since the result has to be reported anyway.
 */
static void
claim_request(FunctionCallInfo fcinfo, int first, WfClaimRequest *req)
{
	WfRequireArg(fcinfo, first, "queue", NULL);
	WfRequireArg(fcinfo, first + 1, "worker", NULL);
	WfRequireArg(fcinfo, first + 2, "max_tasks", NULL);
	WfRequireArg(fcinfo, first + 3, "lease", NULL);
	req->queue = WfTextArg(fcinfo, first, "queue name", WF_ARG_NAME);
	req->worker = WfTextArg(fcinfo, first + 1, "worker name", WF_ARG_NAME);
	req->max_tasks = PG_GETARG_INT32(first + 2);
	req->lease = PG_GETARG_INTERVAL_P(first + 3);
	req->wait_us = 0;
	WfCheckClaimRequest(req);
}

/*
 * put_lead_only puts the one row of a report and claim that leased
 * nothing: lead (the verdict, or the verdicts), then NULLs.
 */
static void
put_lead_only(ReturnSetInfo *rsinfo, Datum lead)
{
	TupleDesc	desc = rsinfo->setDesc;
	Datum	   *values = palloc0(sizeof(Datum) * desc->natts);
	bool	   *nulls = palloc(sizeof(bool) * desc->natts);
	int			i;

	for (i = 0; i < desc->natts; i++)
		nulls[i] = true;
	values[0] = lead;
	nulls[0] = false;
	tuplestore_putvalues(rsinfo->setResult, desc, values, nulls);
}

/*
 * report_and_claim reports the result of task_id under fence (a failure
 * when is_failure) as the single call does, then claims for req and
 * returns the rows: the verdict ("answer") followed by the columns of
 * wf.claim_tasks, one row per attempt leased, or one row with the verdict
 * and NULLs when none was.
 */
static Datum
report_and_claim(FunctionCallInfo fcinfo, int64 task_id, int64 fence, bool is_failure,
				 Jsonb *payload, bool retryable, const WfClaimRequest *req)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *verdict;
	WfLeaseOffer offer;
	WfScheduledTask next;
	Datum		answer;
	bool		answer_null = false;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	offer.queue = req->queue;
	offer.worker = req->worker;
	offer.lease = req->lease;

	/*
	 * One API frame around the two: the report's and the claim's are calls
	 * inside it, which skip the checks and the search_path this one made.
	 */
	WfApiBegin();
	verdict = WfReportTaskResult(task_id, fence, is_failure, payload, retryable, false,
								 &offer, &next);
	answer = CStringGetTextDatum(verdict);
	if (WfClaimNow(rsinfo, req, &next, 1, 1, &answer, &answer_null) == 0)
		put_lead_only(rsinfo, answer);
	WfApiEnd();
	return (Datum) 0;
}

/*
 * wfengine_complete_and_claim is wf.complete_and_claim(task_id, fence,
 * output, queue, worker, max_tasks, lease): wf.complete_task, then a
 * claim without wait, in one call (see the file header).
 */
Datum
wfengine_complete_and_claim(PG_FUNCTION_ARGS)
{
	Jsonb	   *output = WfReportArgs(fcinfo, false);
	WfClaimRequest req;

	claim_request(fcinfo, 3, &req);
	return report_and_claim(fcinfo, PG_GETARG_INT64(0), PG_GETARG_INT64(1), false, output,
							false, &req);
}

/*
 * wfengine_fail_and_claim is wf.fail_and_claim(task_id, fence, error,
 * retryable, queue, worker, max_tasks, lease): wf.fail_task, then a claim
 * without wait, in one call.
 */
Datum
wfengine_fail_and_claim(PG_FUNCTION_ARGS)
{
	Jsonb	   *error = WfReportArgs(fcinfo, true);
	WfClaimRequest req;

	claim_request(fcinfo, 4, &req);
	return report_and_claim(fcinfo, PG_GETARG_INT64(0), PG_GETARG_INT64(1), true, error,
							PG_GETARG_BOOL(3), &req);
}

/*
 * wfengine_start_and_claim is wf.start_and_claim(definition, input,
 * worker, lease, idempotency_key): wf.start_run(definition, input,
 * idempotency_key) and, when the run's first step is a task, that attempt
 * leased to worker for lease, in one call (eager start): one row in the
 * columns of wf.claim_tasks; without an attempt to hand out, the run's id
 * and NULLs (see WfClaimStarted).  The claim's arguments are checked
 * before the run is started.
 */
Datum
wfengine_start_and_claim(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	WfClaimRequest req;
	WfLeaseOffer offer;
	WfScheduledTask first;
	char	   *defname;
	Jsonb	   *input;
	char	   *key;
	pg_uuid_t  *run_id;

	WfRequireArg(fcinfo, 0, "definition name", NULL);
	WfRequireArg(fcinfo, 1, "run input", "Pass '{}' for a run without input.");
	WfRequireArg(fcinfo, 2, "worker", NULL);
	WfRequireArg(fcinfo, 3, "lease", NULL);
	defname = WfTextArg(fcinfo, 0, "definition name", WF_ARG_NAME);
	input = PG_GETARG_JSONB_P(1);
	key = WfTextArg(fcinfo, 4, "idempotency key", WF_ARG_KEY);
	req.queue = "-";			/* the first task's own, checked at publish */
	req.worker = WfTextArg(fcinfo, 2, "worker name", WF_ARG_NAME);
	req.max_tasks = 1;
	req.lease = PG_GETARG_INTERVAL_P(3);
	req.wait_us = 0;
	WfCheckClaimRequest(&req);
	if (!has_privs_of_role(GetUserId(), get_role_oid("wfengine_worker", false)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for function start_and_claim"),
				 errdetail("Role \"%s\" may start runs but not lease tasks.",
						   GetUserNameFromId(GetUserId(), false)),
				 errhint("wf.start_and_claim needs the privileges of wfengine_app and of wfengine_worker; call wf.start_run otherwise.")));

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	offer.queue = NULL;
	offer.worker = req.worker;
	offer.lease = req.lease;
	run_id = WfStartRunEager(defname, input, key, &offer, &first);
	WfClaimStarted(rsinfo, &req, &first, run_id);
	return (Datum) 0;
}

/* ---- batches of results ---- */

/*
 * report_order sorts the reports of a batch by task id, then by position.
 */
static int
report_order(const void *a, const void *b)
{
	const BatchReport *x = (const BatchReport *) a;
	const BatchReport *y = (const BatchReport *) b;

	if (x->task_id != y->task_id)
		return x->task_id < y->task_id ? -1 : 1;
	return x->position - y->position;
}

/*
 * apply_reports applies the reports of b (the outputs, or the errors with
 * their retryables when b->is_failure) in task id order, each as the
 * single call would but with the verdicts of a batch for an unknown task
 * or fence (see the file header), and returns the verdicts in the order of
 * the input.  With an offer (eager dispatch), the lease is offered to the
 * transitions in the order they are applied until max_leased of them have
 * written their new attempt leased under it; the attempts the transitions
 * scheduled go to continuations (at most one per report), *ncontinuations
 * of them.
 */
static const char **
apply_reports(const char *function, BatchReports *b, const WfLeaseOffer *offer,
			  int max_leased, WfScheduledTask *continuations, int *ncontinuations)
{
	BatchArray *ids = &b->ids;
	BatchArray *payloads = &b->payloads;
	int			n = ids->n;
	BatchReport *order = palloc(sizeof(BatchReport) * Max(n, 1));
	const char **verdicts = palloc(sizeof(char *) * Max(n, 1));
	Jsonb	   *json_null = NULL;
	int			nleased = 0;
	BatchContext ctx;
	ErrorContextCallback errcallback;
	int			i;

	for (i = 0; i < n; i++)
	{
		order[i].task_id = DatumGetInt64(ids->elems[i]);
		order[i].position = i;
	}
	qsort(order, n, sizeof(BatchReport), report_order);
	if (ncontinuations != NULL)
		*ncontinuations = 0;

	ctx.function = function;
	ctx.argname = "task_ids";
	ctx.position = 0;
	errcallback.callback = batch_error_context;
	errcallback.arg = &ctx;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	/*
	 * The reports write the same tables one after the other: their writers
	 * stay open from one to the next (rowwrite.c), and an error forgets
	 * them (the abort releases what they hold).
	 */
	WfRowWritersKeep();
	PG_TRY();
	{
		for (i = 0; i < n; i++)
		{
			int			p = order[i].position;
			Jsonb	   *payload;
			bool		retryable = true;
			WfScheduledTask next;

			ctx.position = p + 1;
			ctx.task_id = order[i].task_id;
			if (!payloads->nulls[p])
				payload = DatumGetJsonbP(payloads->elems[p]);
			else
			{
				/* a completion without output: JSON null, as wf.complete_task */
				if (json_null == NULL)
					json_null = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
																   CStringGetDatum("null")));
				payload = json_null;
			}
			if (b->is_failure && !b->retryables.nulls[p])
				retryable = DatumGetBool(b->retryables.elems[p]);
			verdicts[p] = WfReportTaskResult(order[i].task_id, DatumGetInt64(b->fences.elems[p]),
											 b->is_failure, payload, retryable, true,
											 nleased < max_leased ? offer : NULL,
											 continuations != NULL ? &next : NULL);
			if (continuations != NULL && next.task_id != 0)
			{
				continuations[(*ncontinuations)++] = next;
				if (next.leased)
					nleased++;
			}
		}
	}
	PG_CATCH();
	{
		WfRowWritersForget();
		PG_RE_THROW();
	}
	PG_END_TRY();
	WfRowWritersRelease();
	error_context_stack = errcallback.previous;
	return verdicts;
}

/*
 * report_batch applies the reports of a batch (apply_reports) and returns
 * the rows (task_id, answer) in the order of the input.
 */
static Datum
report_batch(FunctionCallInfo fcinfo, const char *function, BatchReports *b)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char **verdicts;
	int			i;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	/* one API frame around the reports, each a call inside it */
	WfApiBegin();
	verdicts = apply_reports(function, b, NULL, 0, NULL, NULL);
	for (i = 0; i < b->ids.n; i++)
	{
		Datum		values[2];
		bool		nulls[2] = {false, false};

		values[0] = b->ids.elems[i];
		values[1] = CStringGetTextDatum(verdicts[i]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	WfApiEnd();
	return (Datum) 0;
}

/*
 * report_batch_and_claim applies the reports of a batch (apply_reports)
 * with the lease of req offered to at most req->max_tasks of them, then
 * claims for req, the attempts the reports scheduled first, and returns
 * the rows: the verdicts in the order of the input ("answers", text[])
 * followed by the columns of wf.claim_tasks, one row per attempt leased,
 * or one row with the verdicts and NULLs when none was.
 */
static Datum
report_batch_and_claim(FunctionCallInfo fcinfo, const char *function, BatchReports *b,
					   const WfClaimRequest *req)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			n = b->ids.n;
	WfScheduledTask *continuations = palloc(sizeof(WfScheduledTask) * Max(n, 1));
	int			ncontinuations;
	WfLeaseOffer offer;
	const char **verdicts;
	Datum	   *texts = palloc(sizeof(Datum) * Max(n, 1));
	Datum		answers;
	bool		answers_null = false;
	int			i;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	offer.queue = req->queue;
	offer.worker = req->worker;
	offer.lease = req->lease;

	/*
	 * One API frame around the reports and the claim, each a call inside
	 * it; what the reports hand the claim (the continuations' strings) lives
	 * in its memory until the claim is done.
	 */
	WfApiBegin();
	verdicts = apply_reports(function, b, &offer, req->max_tasks, continuations,
							 &ncontinuations);
	for (i = 0; i < n; i++)
		texts[i] = CStringGetTextDatum(verdicts[i]);
	answers = PointerGetDatum(construct_array(texts, n, TEXTOID, -1, false, TYPALIGN_INT));
	if (WfClaimNow(rsinfo, req, continuations, ncontinuations, 1, &answers,
				   &answers_null) == 0)
		put_lead_only(rsinfo, answers);
	WfApiEnd();
	return (Datum) 0;
}

/*
 * batch_reports reads the arrays of a batch of reports into b, from
 * argument 0: task_ids and fences, then the outputs (NULL: '{}' for every
 * element; a NULL element: JSON null, as in wf.complete_task), or the
 * errors and retryables (NULL: every failure is retryable, fail_task's
 * default) when is_failure.  Returns the number of the next argument.
 */
static int
batch_reports(FunctionCallInfo fcinfo, bool is_failure, BatchReports *b)
{
	BatchArray *ids = &b->ids;
	int			i;

	b->is_failure = is_failure;
	batch_array(fcinfo, 0, INT8OID, "task_ids", false, false, -1, NULL, ids);
	batch_array(fcinfo, 1, INT8OID, "fences", false, false, ids->n, "task_ids", &b->fences);
	if (is_failure)
	{
		batch_array(fcinfo, 2, JSONBOID, "errors", false, false, ids->n, "task_ids", &b->payloads);
		batch_array(fcinfo, 3, BOOLOID, "retryables", PG_ARGISNULL(3), PG_ARGISNULL(3), ids->n,
					"task_ids", &b->retryables);
		return 4;
	}
	if (!PG_ARGISNULL(2))
		batch_array(fcinfo, 2, JSONBOID, "outputs", false, true, ids->n, "task_ids", &b->payloads);
	else
	{
		Datum		empty = DirectFunctionCall1(jsonb_in, CStringGetDatum("{}"));

		b->payloads.name = "outputs";
		b->payloads.n = ids->n;
		b->payloads.elems = palloc(sizeof(Datum) * Max(ids->n, 1));
		b->payloads.nulls = palloc(sizeof(bool) * Max(ids->n, 1));
		for (i = 0; i < ids->n; i++)
		{
			b->payloads.elems[i] = empty;
			b->payloads.nulls[i] = false;
		}
	}
	return 3;
}

/*
 * wfengine_complete_tasks is wf.complete_tasks(task_ids, fences, outputs):
 * wf.complete_task for each element, in one statement (see
 * batch_reports for the NULLs).
 */
Datum
wfengine_complete_tasks(PG_FUNCTION_ARGS)
{
	BatchReports b;

	(void) batch_reports(fcinfo, false, &b);
	return report_batch(fcinfo, "wf.complete_tasks", &b);
}

/*
 * wfengine_fail_tasks is wf.fail_tasks(task_ids, fences, errors,
 * retryables): wf.fail_task for each element, in one statement.
 */
Datum
wfengine_fail_tasks(PG_FUNCTION_ARGS)
{
	BatchReports b;

	(void) batch_reports(fcinfo, true, &b);
	return report_batch(fcinfo, "wf.fail_tasks", &b);
}

/*
 * batch_and_claim is wf.complete_tasks_and_claim(task_ids, fences,
 * outputs, queue, worker, max_tasks, lease) and, with is_failure,
 * wf.fail_tasks_and_claim(task_ids, fences, errors, retryables, queue,
 * worker, max_tasks, lease): the batch, then a claim without wait, the
 * attempts the reports scheduled on the queue first, in one call (see the
 * file header).  The claim's arguments are checked before any report is
 * applied.
 */
static Datum
batch_and_claim(FunctionCallInfo fcinfo, bool is_failure, const char *function)
{
	BatchReports b;
	WfClaimRequest req;

	claim_request(fcinfo, batch_reports(fcinfo, is_failure, &b), &req);
	return report_batch_and_claim(fcinfo, function, &b, &req);
}

Datum
wfengine_complete_tasks_and_claim(PG_FUNCTION_ARGS)
{
	return batch_and_claim(fcinfo, false, "wf.complete_tasks_and_claim");
}

Datum
wfengine_fail_tasks_and_claim(PG_FUNCTION_ARGS)
{
	return batch_and_claim(fcinfo, true, "wf.fail_tasks_and_claim");
}

/* ---- batches of starts ---- */

/*
 * wfengine_start_runs is wf.start_runs(definition, inputs,
 * idempotency_keys, version): wf.start_run(definition, input, key,
 * version) for each element of inputs, in order, and the run ids in that
 * order (see the file header).  idempotency_keys NULL: no keys; a NULL
 * element: no key for that run.
 */
Datum
wfengine_start_runs(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo;
	BatchArray	inputs;
	BatchArray	keys;
	BatchContext ctx;
	ErrorContextCallback errcallback;
	LOCAL_FCINFO(start, 4);
	int			i;

	WfRequireArg(fcinfo, 0, "definition name", NULL);
	batch_array(fcinfo, 1, JSONBOID, "inputs", false, false, -1, NULL, &inputs);
	batch_array(fcinfo, 2, TEXTOID, "idempotency_keys", true, true, inputs.n, "inputs", &keys);
	/* one column: the expected descriptor, as the result type is a scalar */
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	ctx.function = "wf.start_runs";
	ctx.argname = "inputs";
	ctx.position = 0;
	ctx.task_id = 0;
	errcallback.callback = batch_error_context;
	errcallback.arg = &ctx;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;
	for (i = 0; i < inputs.n; i++)
	{
		Datum		run_id;
		bool		isnull = false;

		ctx.position = i + 1;
		InitFunctionCallInfoData(*start, NULL, 4, PG_GET_COLLATION(), NULL, NULL);
		start->args[0].value = PG_GETARG_DATUM(0);
		start->args[0].isnull = false;
		start->args[1].value = inputs.elems[i];
		start->args[1].isnull = false;
		start->args[2].value = keys.elems[i];
		start->args[2].isnull = keys.nulls[i];
		start->args[3].value = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
		start->args[3].isnull = PG_ARGISNULL(3);
		run_id = wfengine_start_run(start);
		if (start->isnull)
			elog(ERROR, "wf.start_run returned NULL");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &run_id, &isnull);
	}
	error_context_stack = errcallback.previous;
	return (Datum) 0;
}
