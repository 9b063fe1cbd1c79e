/*-------------------------------------------------------------------------
 *
 * defmodel.h
 *	  Workflow definitions: the compiled form (the types every layer above
 *	  reads), its step graph and the validator's error report.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/defmodel.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_DEFMODEL_H
#define WF_DEFMODEL_H

#include "utils/jsonb.h"

/* the successor of the last step */
#define WF_STEP_END (-1)

/* where an expiry or a timeout goes when it fails the run (WfStepEdge) */
#define WF_STEP_FAIL (-2)

/* edges out of one step at most (WfStepEdges) */
#define WF_MAX_SUCCESSORS 34		/* default, 32 choices, expiry */

/* at most this many named correlation keys per definition */
#define WF_MAX_CORRELATION_KEYS 8

/* task rows of a step's compensation are named "compensate:<step>" */
#define WF_COMPENSATE_PREFIX "compensate:"

/* step types; values are persisted in no table, but keep them stable */
typedef enum WfStepType
{
	WF_STEP_TASK = 1,
	WF_STEP_SLEEP = 2,
	WF_STEP_APPROVAL = 3,
	WF_STEP_CHOICE = 4,
	WF_STEP_WAIT_EVENT = 5,
	WF_STEP_SUBWORKFLOW = 6,
	WF_STEP_PARALLEL = 7,
	WF_STEP_COMPENSATION = 8		/* "compensate:<step>": the undoing of a task step */
} WfStepType;

/* slots for tables by step type (the step kinds, their rows of a transition) */
#define WF_STEP_KIND_SLOTS 16

/* task priorities run from -WF_MAX_PRIORITY to WF_MAX_PRIORITY; 0 by default */
#define WF_MAX_PRIORITY 100

/* parallel blocks nest at most this deep (a branch's parallel is depth 2) */
#define WF_MAX_NESTING 3

/* how many decisions an approval step needs */
typedef enum WfApprovalPolicy
{
	WF_POLICY_ANY = 1,			/* one approval */
	WF_POLICY_ALL = 2,			/* every approver */
	WF_POLICY_QUORUM = 3		/* quorum distinct approvers */
} WfApprovalPolicy;

/* one entry of an input or output mapping */
typedef struct WfMapping
{
	char	   *key;			/* field of the produced object */
	Datum		path;			/* compiled jsonpath, or 0 for a literal */
	Jsonb	   *literal;		/* the literal value when path is 0 */
} WfMapping;

/* retry policy of a task step */
typedef struct WfRetryPolicy
{
	int32		max_attempts;	/* 1 = no retry */
	int64		initial_interval;	/* microseconds */
	double		backoff_coefficient;
	int64		max_interval;	/* microseconds */
	double		jitter;			/* fraction of the delay taken off at random */
	int			n_non_retryable;
	char	  **non_retryable;	/* error codes that are never retried */
} WfRetryPolicy;

/* timeouts of a task step, microseconds, 0 = none (enforced by timers) */
typedef struct WfTimeouts
{
	int64		schedule_to_start;
	int64		start_to_close;
	int64		heartbeat;
	int64		total;
} WfTimeouts;

/* one compiled step */
typedef struct WfStepDef
{
	char	   *name;
	WfStepType	type;
	char	   *queue;
	char	   *activity;		/* NULL when not given */
	bool		has_input;		/* false: the step gets the run's input */
	int			n_input;
	WfMapping  *input;
	WfRetryPolicy retry;
	WfTimeouts	timeout;
	int			next;			/* index of the successor or WF_STEP_END */
	bool		skippable;		/* wf.skip_step may skip it */
	int32		priority;		/* of its tasks in their queue, or: */
	Datum		priority_path;	/* a JSONPath to it in the context, or 0 */
	/* sleep steps: a fixed duration, or a timestamp found in the context */
	int64		sleep_duration; /* microseconds, 0 when "until" is used */
	Datum		sleep_until;	/* compiled jsonpath, 0 when not used */
	/* approval steps */
	int			n_approvers;	/* fixed approvers, or 0 with a path */
	char	  **approvers;
	Datum		approvers_path; /* compiled jsonpath, or 0 */
	WfApprovalPolicy policy;
	int32		quorum;			/* for WF_POLICY_QUORUM */
	int32		rejections;		/* rejects that end the step as rejected */
	int64		expires;		/* microseconds, 0 = never */
	int			expiry_next;	/* step on expiry, or WF_STEP_END to fail */
	/* choice steps: conditions in order; "next" is the default */
	int			n_choices;
	Datum	   *choice_when;	/* compiled jsonpath predicates */
	char	  **choice_when_text;	/* the same as the definition writes them */
	char	  **choice_next_names;
	int		   *choice_next;	/* step index, or WF_STEP_END */
	/* wait_event steps: the signal's name */
	char	   *event_name;
	/* task steps: keys of the output sealed as sensitive */
	int			n_sensitive_input;	/* keys of a task's input sealed as sensitive */
	char	  **sensitive_input;
	int			n_sensitive_output;
	char	  **sensitive_output;
	/* task steps: the activity wf.cancel_run() runs to undo it, or NULL */
	struct WfStepDef *compensate;
	/* subworkflow steps: the child definition, pinned to a version */
	char	   *sub_name;
	int32		sub_version;
	/* parallel steps: one child definition per branch; join and policy */
	int			n_branches;
	char	  **branch_names;	/* "<definition>:<step>:<i>" */
	Jsonb	  **branch_specs;
	int32		join_count;		/* branches that must complete; n = all */
	bool		ignore_branch_failure;	/* false: a failed branch fails the step */
	/* both: the definition_id of each child (subworkflow: one) */
	int64	   *child_ids;
} WfStepDef;

/* one compiled, immutable definition version */
typedef struct WfDefinition
{
	int64		definition_id;
	char	   *tenant_id;
	char	   *name;
	int32		version;
	int			nsteps;
	WfStepDef  *steps;
	bool		has_output;		/* false: the last step's output */
	int			n_output;
	WfMapping  *output;
	int64		run_timeout;	/* microseconds, 0 = none */
	bool		compensate_on_failure;	/* "on_failure": "compensate" (a saga) */
	int			n_sensitive_input;	/* keys of the run input sealed as sensitive */
	char	  **sensitive_input;
	int			n_correlation;	/* wf.send_event() keys: name -> JSONPath */
	WfMapping  *correlation;
	bool		has_approvals;	/* some step is an approval step */
	bool		has_children;	/* some step starts child runs */
	int			total_steps;	/* its steps and those of its branches */
	int			depth;			/* 1, or 1 + the deepest branch's */
} WfDefinition;

/* the kinds of edges of the step graph */
typedef enum WfEdgeKind
{
	WF_EDGE_NEXT,				/* the step's next (or the end) */
	WF_EDGE_CHOICE,				/* a condition of a choice step */
	WF_EDGE_DEFAULT,			/* a choice step's default */
	WF_EDGE_EXPIRY,				/* an approval that expired */
	WF_EDGE_TIMEOUT				/* a wait_event step that timed out */
} WfEdgeKind;

/* one edge of the step graph, out of a step */
typedef struct WfStepEdge
{
	WfEdgeKind	kind;
	int			choice;			/* WF_EDGE_CHOICE: the condition, from 0 */
	int			target;			/* step index, WF_STEP_END or WF_STEP_FAIL */
} WfStepEdge;

/* where the validator is, for error messages */
typedef struct ValidateCtx
{
	const char *defname;
	const char *step;			/* step name, or NULL at the top level */
	int			step_pos;		/* 1-based position, for steps without a name */
	bool		enforce_limits; /* false when loading an already published
								 * spec: the configurable limits and the
								 * checks an older version may not pass
								 * (approvers' repeats and length, a quorum
								 * given) apply only at publish */
	const char *field_prefix;	/* prefix of field names, e.g. "compensate" */
} ValidateCtx;

extern int	WfDefinitionStepIndex(const WfDefinition *def, const char *step);
extern int	WfStepEdges(const WfDefinition *def, int i, WfStepEdge *edges);
extern void WfDefError(const ValidateCtx *cx, const char *field, int code,
					   const char *hint, const char *fmt,...) pg_attribute_printf(5, 6) pg_attribute_noreturn();
extern void WfDefCheckGraph(const ValidateCtx *cx, WfDefinition *def, char **next_names,
							char **expiry_names);

#endif							/* WF_DEFMODEL_H */
