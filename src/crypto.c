/*-------------------------------------------------------------------------
 *
 * crypto.c
 *	  Hashing and randomness for wfengine, all through libsodium.
 *
 * The history of a run is a hash chain: each event's hash is BLAKE2b-256
 * over the previous event's hash and every stored field of the event, in
 * a fixed, length-delimited encoding.  Editing, removing, inserting or
 * reordering an event breaks the chain, and the run row keeps the hash of
 * the last event, so truncating the tail is detected too.  The chain is
 * unkeyed: it detects tampering by anyone who does not also recompute
 * every later hash and the run row; a keyed chain needs the server key
 * that the approvals issue introduces.
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/crypto.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sodium.h>

#include "utils/timestamp.h"

#include "crypto.h"

/* forward declarations */
static void hash_cstring(crypto_generichash_state *st, const char *s);
static void hash_int64(crypto_generichash_state *st, int64 v);

/*
 * WfCryptoInit initialises libsodium once per process.
 */
void
WfCryptoInit(void)
{
	if (sodium_init() < 0)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("could not initialize libsodium")));
}

/*
 * WfHashBytes computes the BLAKE2b-256 hash of len bytes at data.
 */
void
WfHashBytes(const void *data, Size len, uint8 *out)
{
	crypto_generichash(out, WF_HASH_LEN, data, len, NULL, 0);
}

/*
 * hash_cstring feeds a possibly NULL string: a presence byte, the length
 * and the bytes, so no two different field lists hash alike.
 */
static void
hash_cstring(crypto_generichash_state *st, const char *s)
{
	uint8		present = (s != NULL);

	crypto_generichash_update(st, &present, 1);
	if (s != NULL)
	{
		Size		len = strlen(s);

		hash_int64(st, (int64) len);
		crypto_generichash_update(st, (const uint8 *) s, len);
	}
}

/*
 * hash_int64 feeds an integer in big-endian order.
 */
static void
hash_int64(crypto_generichash_state *st, int64 v)
{
	uint8		buf[8];
	int			i;

	for (i = 7; i >= 0; i--)
	{
		buf[i] = (uint8) (v & 0xff);
		v >>= 8;
	}
	crypto_generichash_update(st, buf, sizeof(buf));
}

/*
 * WfHashEvent computes the chained hash of one history event.
 */
void
WfHashEvent(const WfEventHashInput *in, uint8 *out)
{
	crypto_generichash_state st;

	crypto_generichash_init(&st, NULL, 0, WF_HASH_LEN);
	crypto_generichash_update(&st, in->prev_hash, WF_HASH_LEN);
	crypto_generichash_update(&st, in->run_id->data, UUID_LEN);
	hash_cstring(&st, in->tenant_id);
	hash_int64(&st, in->seq);
	hash_cstring(&st, in->type);
	hash_cstring(&st, in->step);
	hash_int64(&st, in->attempt);
	hash_cstring(&st, in->actor);
	hash_int64(&st, in->created_at);
	hash_int64(&st, (int64) in->payload_len);
	crypto_generichash_update(&st, (const uint8 *) in->payload, in->payload_len);
	crypto_generichash_final(&st, out, WF_HASH_LEN);
}

/*
 * WfNewRunId makes a UUID version 7 (RFC 9562): 48 bits of Unix time in
 * milliseconds, then random bits.  Time-ordered ids keep inserts into
 * the primary key of wf.runs at the right edge of the index.
 */
void
WfNewRunId(pg_uuid_t *uuid)
{
	TimestampTz now = GetCurrentTimestamp();
	uint64		unix_ms;
	int			i;

	/* TimestampTz counts microseconds from 2000-01-01 */
	unix_ms = (uint64) ((now / 1000) +
						((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000));

	randombytes_buf(uuid->data, UUID_LEN);
	for (i = 5; i >= 0; i--)
	{
		uuid->data[i] = (uint8) (unix_ms & 0xff);
		unix_ms >>= 8;
	}
	uuid->data[6] = (uuid->data[6] & 0x0f) | 0x70;	/* version 7 */
	uuid->data[8] = (uuid->data[8] & 0x3f) | 0x80;	/* RFC 4122 variant */
}

/*
 * WfRandomFraction returns a uniformly distributed number in [0, 1).
 */
double
WfRandomFraction(void)
{
	return (double) randombytes_uniform(1000000000) / 1000000000.0;
}
