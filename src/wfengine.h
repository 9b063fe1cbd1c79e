/*-------------------------------------------------------------------------
 *
 * wfengine.h
 *	  Declarations shared by every wfengine subsystem.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/wfengine.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_WFENGINE_H
#define WF_WFENGINE_H

/* length of every hash wfengine stores (BLAKE2b-256) */
#define WF_HASH_LEN 32

/* true when the library was loaded by shared_preload_libraries */
extern bool wf_preloaded;

/* tenant.c */
extern const char *WfCurrentTenant(void);
extern const char *WfCurrentActor(void);
extern Oid	WfExtensionOwner(void);
extern void WfTenantInit(void);
extern void WfApiSwitchIn(Oid owner);
extern void WfApiSwitchOut(void);
extern Oid	WfApiCaller(void);
extern const char *WfActForTenant(const char *tenant);

#endif							/* WF_WFENGINE_H */
