/*-------------------------------------------------------------------------
 *
 * guc.h
 *	  Configuration variables of wfengine.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/guc.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_GUC_H
#define WF_GUC_H

/* GUC variables (alphabetical, as in guc.c) */
extern char *wf_anchor_key;
extern char *wf_approval_key;
extern char *wf_master_keys;
extern char *wf_databases;
extern int	wf_decide_failure_limit;
extern int	wf_decide_failure_window;
extern bool wf_enabled;
extern int	wf_launcher_naptime;
extern int	wf_metrics_databases;
extern int	wf_max_claim_batch;
extern int	wf_max_definition_size;
extern int	wf_max_payload_size;
extern int	wf_max_steps;
extern int	wf_naptime;
extern int	wf_poison_threshold;
extern char *wf_quarantine_delays;
extern int	wf_timer_batch;

/* the most delays wfengine.quarantine_delays may list */
#define WF_MAX_QUARANTINE_DELAYS 16

extern void WfGucInit(void);

#endif							/* WF_GUC_H */
