/*-------------------------------------------------------------------------
 *
 * crypto.h
 *	  Hashing and random numbers (libsodium).
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/crypto.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WF_CRYPTO_H
#define WF_CRYPTO_H

#include "utils/timestamp.h"
#include "utils/uuid.h"

/* length of every hash wfengine stores (BLAKE2b-256) */
#define WF_HASH_LEN 32

/* everything that is hashed into one history event */
typedef struct WfEventHashInput
{
	const uint8 *prev_hash;		/* WF_HASH_LEN bytes; zeros for seq 1 */
	const pg_uuid_t *run_id;
	const char *tenant_id;
	int32		seq;
	const char *type;
	const char *step;			/* NULL when the event has no step */
	int32		attempt;		/* 0 when the event has no attempt */
	const char *actor;
	TimestampTz created_at;
	const char *payload;		/* canonical text of the jsonb payload */
	Size		payload_len;
} WfEventHashInput;

extern void WfCryptoInit(void);
extern void WfHashBytes(const void *data, Size len, uint8 *out);
extern void WfHashEvent(const WfEventHashInput *in, uint8 *out);
extern void WfNewRunId(pg_uuid_t *uuid);
extern double WfRandomFraction(void);
extern void WfRandomBytes(void *buf, size_t len);

/* approval tokens: "wfa_" and 43 characters of URL-safe base64 */
#define WF_TOKEN_PREFIX "wfa_"
#define WF_TOKEN_BYTES 32
#define WF_TOKEN_TEXT_LEN 48	/* prefix + 43 + NUL, rounded */

extern bool WfTokenKeyConfigured(void);
extern void WfMintToken(char *text, uint8 *hash);
extern bool WfHashToken(const char *text, uint8 *hash);

/* anchors of the hash chains (replay.c): keyed BLAKE2b-256 */
extern bool WfAnchorSign(const char *tenant, const pg_uuid_t *run_id, int32 seq,
						 const uint8 *hash, uint8 *signature);

/* the tenant part of LISTEN channel names (notify.c) */
#define WF_CHANNEL_TAG_LEN 12
extern void WfChannelTag(const uint8 *key, size_t keylen, const char *tenant, char *tag);

#endif							/* WF_CRYPTO_H */
