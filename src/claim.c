/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  Lease-based claiming of task attempts (FOR UPDATE SKIP LOCKED).
 *
 * A task attempt is claimable when its status is "ready" and its
 * available_at has passed, or when it is "leased" and its lease has
 * expired.  The two cases share one column: a claim sets available_at to
 * the lease expiry, so "available_at <= now" covers both, and one partial
 * index (tenant, queue, available_at, task_id) WHERE status IN ('ready',
 * 'leased') serves every claim in FIFO order of availability.
 *
 * One statement claims a batch: the CTE picks rows in index order with
 * FOR UPDATE SKIP LOCKED (so concurrent claimers never block on, or
 * receive, the same row) and the UPDATE hands out a new lease and a new
 * fencing token (fence + 1).  A re-claim after an expired lease is the
 * same attempt with a higher fence; the old holder's late result then
 * carries an old fence and is recorded as stale.  Claims are not run
 * events: the task row is the record of each delivery (worker, fence,
 * deliveries), and the event that accepts a result names the lease that
 * produced it.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/claim.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "spi_util.h"
#include "wfengine.h"

PG_FUNCTION_INFO_V1(wfengine_claim_tasks);

#define WF_CLAIM_COLUMNS 11
#define WF_MAX_LEASE ((int64) 7 * USECS_PER_DAY)

/*
 * wfengine_claim_tasks is wf.claim_tasks(queue, worker, max_tasks, lease):
 * it leases up to max_tasks claimable attempts of queue to worker and
 * returns them.
 */
Datum
wfengine_claim_tasks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *worker = text_to_cstring(PG_GETARG_TEXT_PP(1));
	int32		max_tasks = PG_GETARG_INT32(2);
	Interval   *lease = PG_GETARG_INTERVAL_P(3);
	int64		lease_us;
	Datum		values[6];
	uint64		n;
	uint64		i;

	if (strlen(queue) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue name must not be empty")));
	if (strlen(worker) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("worker name must not be empty"),
				 errhint("Name the worker so that leases and results can be traced to it.")));
	if (max_tasks < 1 || max_tasks > wf_max_claim_batch)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_tasks must be between 1 and %d, not %d",
						wf_max_claim_batch, max_tasks),
				 errhint("The upper bound is set by wfengine.max_claim_batch.")));
	lease_us = lease->time + (int64) lease->day * USECS_PER_DAY +
		(int64) lease->month * DAYS_PER_MONTH * USECS_PER_DAY;
	if (lease_us <= 0 || lease_us > WF_MAX_LEASE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must be positive and at most 7 days"),
				 errhint("A lease covers one delivery of a task; when it expires the task can be claimed again.")));

	InitMaterializedSRF(fcinfo, 0);
	WfApiBegin();

	values[0] = CStringGetTextDatum(WfCurrentTenant());
	values[1] = CStringGetTextDatum(queue);
	values[2] = Int64GetDatum((int64) max_tasks);
	values[3] = CStringGetTextDatum(worker);
	values[4] = TimestampTzGetDatum(GetCurrentTimestamp());
	values[5] = IntervalPGetDatum(lease);

	n = WfExecPlan(WF_PLAN_CLAIM, values, NULL, false, 0, SPI_OK_UPDATE_RETURNING);
	for (i = 0; i < n; i++)
	{
		Datum		out[WF_CLAIM_COLUMNS];
		bool		nulls[WF_CLAIM_COLUMNS];
		int			c;

		for (c = 0; c < WF_CLAIM_COLUMNS; c++)
			out[c] = WfGetDatum(i, c + 1, &nulls[c]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, out, nulls);
	}

	WfApiEnd();
	return (Datum) 0;
}
