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
extern const char *WfActForTenant(const char *tenant);

#endif							/* WF_TENANT_H */
