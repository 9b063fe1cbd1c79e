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

#include "spi_util.h"

#include "utils/jsonb.h"
#include "utils/uuid.h"

extern Jsonb *WfSealKeys(const char *tenant, Jsonb *obj, char **keys, int nkeys);
extern Jsonb *WfMaskSealed(Jsonb *obj, char **keys, int nkeys);
extern bool WfMaySeeSensitive(Oid caller);
extern Jsonb *WfOpenForCaller(const char *tenant, Oid caller, Jsonb *value, char **damage);
extern bytea *WfInputDigest(const char *tenant, const pg_uuid_t *run_id, Jsonb *input);
extern void WfRefuseSealedLookalikes(Jsonb *value, const char *what, const char *owner);
extern void WfRefuseSealedLookalikeText(const char *value, const char *what,
										const char *owner);
extern void WfSensitiveInit(void);
extern uint8 *WfParseEnvelope(const char *text, int len, int32 *key_id, size_t *boxlen);
extern char *WfOpenBox(const uint8 *box, size_t boxlen, const uint8 *key,
					   const char *ad, int adlen);


/* the statements of sensitive.c */
extern PGDLLIMPORT WfPlanTable WfSensitivePlans;

#endif							/* WF_SENSITIVE_H */
