/*-------------------------------------------------------------------------
 *
 * stepkind.h
 *	  What a step kind does: the ops the run core calls, and their table.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/stepkind.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_STEPKIND_H
#define WF_STEPKIND_H

#include "nodes/pg_list.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "definition.h"
#include "state.h"

/* transition.h; named here only through pointers */
struct WfTransition;
struct WfTaskResult;
struct WfExplanation;

/*
 * One WfStepKindOps per step kind, registered at load time (wfengine.c's
 * table) for the step types it serves; the run core (transition.c,
 * runstore.c) finds a step's ops with WfStepKindFor and never names a
 * step kind itself, in the way PostgreSQL reaches an index access method
 * through its IndexAmRoutine.  Every member but name may be NULL: the
 * core's default is given beside each (enter is NULL only for a kind that
 * is never a step of a definition: compensation).
 */
typedef struct WfStepKindOps
{
	const char *name;

	/*
	 * The kind's tasks undo work: they run while the run is undone
	 * (cancelled or compensating), where the tasks of other kinds settle.
	 */
	bool		undoes;

	/* the run enters a new visit of the step */
	void		(*enter) (struct WfTransition *tr, int step_index);

	/*
	 * The step's live task attempt completed (a worker's accepted result,
	 * or one held while the run was paused).  NULL: task_completed is
	 * recorded and the run moves past the step.
	 */
	void		(*task_completed) (struct WfTransition *tr, int step_index,
								   const struct WfTaskResult *res);

	/*
	 * The step's task attempts gave up (its retry policy is spent, or the
	 * engine stopped it).  NULL: the run fails at the step.
	 */
	void		(*task_gave_up) (struct WfTransition *tr, int step_index,
								 const char *reason, Jsonb *error, int32 attempt);

	/*
	 * Does a child_done timer (written by another run for this one) still
	 * concern the current visit of the step the run is at?  The core has
	 * checked that the run is live and at that step.  NULL: never.
	 */
	bool		(*timer_applies) (WfRunState *run, const WfStepDef *sd,
								  WfTimerKind kind, int32 generation,
								  Jsonb *payload);

	/*
	 * A timer of the step fired and applies: a sleep, the step's total
	 * timeout, an approval's expiry, a child run's end.  NULL (or a kind
	 * it does not handle, false): a step timeout fails the run.
	 */
	bool		(*timer_fired) (struct WfTransition *tr, int step_index, WfTimerKind kind,
								Jsonb *payload, TimestampTz due_at);

	/*
	 * The run leaves the step unfinished (a skip, a cancellation): the kind
	 * withdraws what it runs (reason: the withdrawal's) and releases what
	 * the visit holds.  NULL: nothing beyond the core's.
	 */
	void		(*leave) (struct WfTransition *tr, int step_index, const char *reason);

	/*
	 * wf.resume_run: the paused run has no live attempt at the step; it
	 * takes up what the pause stopped.  NULL: nothing to take up.
	 */
	void		(*resume) (struct WfTransition *tr, int step_index);

	/*
	 * The transition's statement is written: the kind writes its own rows
	 * (called for every registered kind, once, in table order).
	 */
	void		(*write) (struct WfTransition *tr);

	/*
	 * wf.explain: what the live run (not paused) waits for at the step:
	 * the kind sets ex->waiting and ex->details and may add commands that
	 * apply because of the wait.  NULL: the step never waits (a choice).
	 */
	void		(*explain) (const WfRunState *run, const WfStepDef *sd,
							struct WfExplanation *ex);
} WfStepKindOps;

/* what a step kind's explain answers (see explain.c) */
typedef struct WfExplanation
{
	const char *waiting;		/* the "waiting_for" of wf.explain; NULL: none */
	Jsonb	   *details;		/* its "details"; NULL: {} */
	List	   *commands;		/* commands (char *) that apply because of it */
} WfExplanation;

/*
 * The undoing of a run (compensation): what the core calls when a run
 * that is being cancelled settles its attempt in flight, and when a run
 * whose definition compensates on failure would fail.
 */
typedef struct WfUndoOps
{
	void		(*settle) (struct WfTransition *tr, const char *settled_step,
						   int32 settled_visit);
	void		(*compensate_failure) (struct WfTransition *tr, const char *step,
									   int32 attempt, const char *reason,
									   Jsonb *error);
} WfUndoOps;

extern void WfRegisterStepKind(WfStepType type, const WfStepKindOps *ops);
extern void WfRegisterUndo(const WfUndoOps *ops);
extern const WfStepKindOps *WfStepKindFor(const WfStepDef *sd);
extern const WfUndoOps *WfUndo(void);
extern void WfStepKindsWrite(struct WfTransition *tr);

#endif							/* WF_STEPKIND_H */
