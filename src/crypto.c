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

#include "fmgr.h"
#include "utils/timestamp.h"

#include "crypto.h"
#include "guc.h"

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

/*
 * WfAnchorSign signs the head of a run's hash chain (tenant, run, seq and
 * the hash of event seq) with wfengine.anchor_key: keyed BLAKE2b-256 of a
 * versioned, unambiguous message, written to signature (WF_HASH_LEN
 * bytes).  Returns false, writing nothing, when no usable key is set (at
 * least crypto_generichash_KEYBYTES bytes in hex).
 */
bool
WfAnchorSign(const char *tenant, const pg_uuid_t *run_id, int32 seq,
			 const uint8 *hash, uint8 *signature)
{
	uint8		key[crypto_generichash_KEYBYTES_MAX];
	size_t		keylen = 0;
	crypto_generichash_state st;
	uint32		tlen = (uint32) strlen(tenant);
	uint8		buf[4];

	if (wf_anchor_key == NULL || wf_anchor_key[0] == '\0' ||
		sodium_hex2bin(key, sizeof(key), wf_anchor_key, strlen(wf_anchor_key),
					   NULL, &keylen, NULL) != 0 ||
		keylen < crypto_generichash_KEYBYTES)
	{
		sodium_memzero(key, sizeof(key));
		return false;
	}
	crypto_generichash_init(&st, key, keylen, WF_HASH_LEN);
	crypto_generichash_update(&st, (const uint8 *) "wfengine anchor 1", 17);
	buf[0] = (uint8) (tlen >> 24);
	buf[1] = (uint8) (tlen >> 16);
	buf[2] = (uint8) (tlen >> 8);
	buf[3] = (uint8) tlen;
	crypto_generichash_update(&st, buf, 4);
	crypto_generichash_update(&st, (const uint8 *) tenant, tlen);
	crypto_generichash_update(&st, run_id->data, UUID_LEN);
	buf[0] = (uint8) ((uint32) seq >> 24);
	buf[1] = (uint8) ((uint32) seq >> 16);
	buf[2] = (uint8) ((uint32) seq >> 8);
	buf[3] = (uint8) seq;
	crypto_generichash_update(&st, buf, 4);
	crypto_generichash_update(&st, hash, WF_HASH_LEN);
	crypto_generichash_final(&st, signature, WF_HASH_LEN);
	sodium_memzero(key, sizeof(key));
	sodium_memzero(&st, sizeof(st));
	return true;
}

/*
 * The approval token key: wfengine.approval_key, 32 or more bytes written
 * in hex, readable by superusers only.  Tokens are hashed with BLAKE2b
 * keyed by it, so that the stored hashes are worthless without the key.
 */
static bool
token_key(uint8 *key, size_t *keylen)
{
	size_t		bin_len = 0;

	if (wf_approval_key == NULL || wf_approval_key[0] == '\0')
		return false;
	if (sodium_hex2bin(key, crypto_generichash_KEYBYTES_MAX, wf_approval_key,
					   strlen(wf_approval_key), NULL, &bin_len, NULL) != 0 ||
		bin_len < crypto_generichash_KEYBYTES)
		return false;
	*keylen = bin_len;
	return true;
}

/*
 * WfTokenKeyConfigured tells whether a usable approval key is set.
 */
bool
WfTokenKeyConfigured(void)
{
	uint8		key[crypto_generichash_KEYBYTES_MAX];
	size_t		keylen;
	bool		ok = token_key(key, &keylen);

	sodium_memzero(key, sizeof(key));
	return ok;
}

/*
 * keyed_hash hashes the raw bytes of a token with the approval key.
 */
static void
keyed_hash(const uint8 *raw, uint8 *hash)
{
	uint8		key[crypto_generichash_KEYBYTES_MAX];
	size_t		keylen;

	if (!token_key(key, &keylen))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("approval tokens need wfengine.approval_key"),
				 errhint("A superuser sets wfengine.approval_key to 32 to 64 random bytes in hex, e.g. the output of \"openssl rand -hex 32\".")));
	crypto_generichash(hash, WF_HASH_LEN, raw, WF_TOKEN_BYTES, key, keylen);
	sodium_memzero(key, sizeof(key));
}

/*
 * WfMintToken makes a new token: 256 random bits, given out in URL-safe
 * base64 behind a recognisable prefix.  text receives the token (at least
 * WF_TOKEN_TEXT_LEN bytes), hash its keyed hash.  The raw bytes are wiped.
 */
void
WfMintToken(char *text, uint8 *hash)
{
	uint8		raw[WF_TOKEN_BYTES];

	randombytes_buf(raw, sizeof(raw));
	keyed_hash(raw, hash);
	strcpy(text, WF_TOKEN_PREFIX);
	sodium_bin2base64(text + strlen(WF_TOKEN_PREFIX),
					  WF_TOKEN_TEXT_LEN - strlen(WF_TOKEN_PREFIX),
					  raw, sizeof(raw), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(raw, sizeof(raw));
}

/*
 * WfHashToken computes the keyed hash of a token given out by
 * WfMintToken; false when text does not have the token's form.
 */
bool
WfHashToken(const char *text, uint8 *hash)
{
	uint8		raw[WF_TOKEN_BYTES];
	size_t		len = 0;
	size_t		plen = strlen(WF_TOKEN_PREFIX);

	if (strncmp(text, WF_TOKEN_PREFIX, plen) != 0 ||
		sodium_base642bin(raw, sizeof(raw), text + plen, strlen(text + plen),
						  NULL, &len, NULL, sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
		len != WF_TOKEN_BYTES)
	{
		/* still spend the time of a hash, whatever the input */
		memset(raw, 0, sizeof(raw));
		keyed_hash(raw, hash);
		return false;
	}
	keyed_hash(raw, hash);
	sodium_memzero(raw, sizeof(raw));
	return true;
}

/*
 * WfChannelTag writes into tag (WF_CHANNEL_TAG_LEN + 1 bytes) the hex of a
 * BLAKE2b hash of tenant keyed by key: the part of a tenant's LISTEN
 * channels that another tenant cannot compute.
 */
void
WfChannelTag(const uint8 *key, size_t keylen, const char *tenant, char *tag)
{
	uint8		hash[WF_CHANNEL_TAG_LEN / 2];

	if (crypto_generichash(hash, sizeof(hash), (const uint8 *) tenant, strlen(tenant), key, keylen) != 0)
		elog(ERROR, "could not hash a channel tag");
	sodium_bin2hex(tag, WF_CHANNEL_TAG_LEN + 1, hash, sizeof(hash));
}

/*
 * WfRandomBytes fills buf with len random bytes.
 */
void
WfRandomBytes(void *buf, size_t len)
{
	randombytes_buf(buf, len);
}

PG_FUNCTION_INFO_V1(wfengine_random_bytes);

/*
 * wfengine_random_bytes is wf._random_bytes(n): n bytes from libsodium's
 * generator, for secrets the install script creates.
 */
Datum
wfengine_random_bytes(PG_FUNCTION_ARGS)
{
	int32		n = PG_GETARG_INT32(0);
	bytea	   *out;

	if (n < 1 || n > 1024)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n must be between 1 and 1024, not %d", n)));
	out = palloc(VARHDRSZ + n);
	SET_VARSIZE(out, VARHDRSZ + n);
	randombytes_buf(VARDATA(out), n);
	PG_RETURN_BYTEA_P(out);
}
