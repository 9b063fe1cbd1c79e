/*-------------------------------------------------------------------------
 *
 * sensitive.h
 *	  Sensitive fields sealed per tenant (see sensitive.c).
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/sensitive.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_SENSITIVE_H
#define WF_SENSITIVE_H

#include "utils/jsonb.h"

extern Jsonb *WfSealKeys(const char *tenant, Jsonb *obj, char **keys, int nkeys);
extern bool WfMaySeeSensitive(Oid caller);
extern Jsonb *WfOpenAll(const char *tenant, Jsonb *value);
extern Jsonb *WfOpenForCaller(const char *tenant, Oid caller, Jsonb *value);
extern void WfSensitiveReset(void);
extern uint8 *WfParseEnvelope(const char *text, int len, int32 *key_id, size_t *boxlen);
extern char *WfOpenBox(const uint8 *box, size_t boxlen, const uint8 *key,
					   const char *ad, int adlen);

#endif							/* WF_SENSITIVE_H */
