/*-------------------------------------------------------------------------
 *
 * tenant.h
 *	  Who the session is (its tenant and actor) and the switch to the
 *	  extension owner that every API call runs under.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/tenant.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_TENANT_H
#define WF_TENANT_H

extern const char *WfCurrentTenant(void);
extern const char *WfCurrentActor(void);
extern Oid	WfExtensionOwner(void);
extern void WfTenantInit(void);
extern void WfApiSwitchIn(Oid owner);
extern void WfApiSwitchOut(void);
extern Oid	WfApiCaller(void);
extern bool WfInApiCall(void);
extern const char *WfActForTenant(const char *tenant);

/*
 * The kinds of the engine's transaction-level locks on a (tenant, key)
 * pair: field 4 of an advisory lock tag, apart from SQL's advisory locks
 * (1 and 2) and from each other.
 */
#define WF_LOCK_QUOTA		0x5746	/* quota.c: a queue's or the live runs' count */
#define WF_LOCK_CORRELATION	0x5747	/* correlate.c: a correlation key */
#define WF_LOCK_START_KEY	0x5748	/* runstore.c: an idempotency key of wf.start_run */

extern bool WfLockTenantKey(const char *tenant, const char *key, uint16 kind, bool wait);

/*
 * Lock waits.  The engine worker (and wf.tick) never waits for a row or a
 * tenant key that another transaction holds: while WfSetLockWait(false) is
 * in force, every lock the engine takes by itself (WfRowLock, the locking
 * statements of runstore.c, WfLockTenantKey) fails at once with
 * ERRCODE_LOCK_NOT_AVAILABLE instead, and the caller retries the item later.
 */
extern bool WfLockWaitAllowed(void);
extern bool WfSetLockWait(bool allowed);

#endif							/* WF_TENANT_H */
