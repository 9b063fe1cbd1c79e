/*-------------------------------------------------------------------------
 *
 * sensitive.c
 *	  Sensitive fields: encrypted at rest, per tenant, with crypto-shredding.
 *
 * A definition marks the keys of the run input ("sensitive": {"input":
 * [...]}) and a task step the keys of its output ("sensitive": {"output":
 * [...]}) that must never be stored in the clear.  Their values are sealed
 * the moment they enter the engine (wf.start_run, a worker's report)
 * into an envelope, a JSON string
 *
 *		"wfenc:v1:<data key id>:<base64url(nonce || ciphertext)>"
 *
 * made with XChaCha20-Poly1305 (libsodium, IETF variant) under the
 * tenant's data key, the associated data binding it to the tenant and the
 * key id.  Everything downstream (the run's input and context, events,
 * task rows, mappings into later steps) carries the envelope; the history
 * holds ciphertext only.  Sensitive values cannot drive choice conditions.
 *
 * Data keys: one or more per tenant in wf.tenant_keys, 32 random bytes,
 * stored only wrapped (XChaCha20-Poly1305) under a master key from the
 * superuser-only setting wfengine.master_keys ("id:hex,id:hex"; the first
 * wraps new keys, the others only unwrap, so master keys rotate).
 * wf.rotate_tenant_key() starts a new data key for new envelopes;
 * wf.rewrap_tenant_keys() wraps every data key again under the current
 * master key.  wf.destroy_tenant_keys() erases a tenant's wrapped keys:
 * every envelope of the tenant becomes unreadable for good (crypto-
 * shredding; backups made before still hold the wrapped keys, which stop
 * opening once the master key they were wrapped under is retired).
 *
 * Decryption: members of the role wfengine_sensitive get the plain values
 * of their own tenant's envelopes from wf.claim_tasks (the task input)
 * and from wf.decrypt(jsonb); everyone else sees envelopes.  A missing or
 * wrong master key, or a destroyed data key, is an error that changes
 * nothing (a matter of configuration).  A damaged envelope (malformed,
 * changed, naming a data key the tenant does not have) is data: wf.decrypt
 * refuses it with 22P02, and wf.claim_tasks fails the one task whose input
 * holds it (claim.c) instead of the whole batch.
 *
 * Envelopes are unambiguous: every API function that stores JSON a caller
 * gives refuses a string value that begins with "wfenc:" (22023,
 * WfRefuseSealedLookalikes), so the only strings of that form in the
 * engine's tables are the ones it sealed (or a superuser wrote).
 *
 * Nothing compares sealed values by opening them for a caller who may not
 * read them.  A keyed start records a keyed digest of its plain input
 * (WfInputDigest: BLAKE2b keyed per tenant from the channel key of
 * wf.secrets, over the run id and a canonical encoding of the input), and
 * a repeated start compares digests for a member of wfengine_sensitive,
 * and the input without its sealed values for anyone else (run.c).
 *
 * Copyright (c) 2026, wfengine developers
 *
 * IDENTIFICATION
 *	  src/sensitive.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sodium.h>

#include "catalog/pg_authid.h"
#include "crypto.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/syscache.h"
#include "utils/uuid.h"

#include "guc.h"
#include "notify.h"
#include "sensitive.h"
#include "spi_util.h"
#include "tenant.h"

PG_FUNCTION_INFO_V1(wfengine_decrypt);
PG_FUNCTION_INFO_V1(wfengine_rotate_tenant_key);
PG_FUNCTION_INFO_V1(wfengine_rewrap_tenant_keys);
PG_FUNCTION_INFO_V1(wfengine_destroy_tenant_keys);
PG_FUNCTION_INFO_V1(wfengine_refuse_sealed_lookalikes);

/* the statements of sensitive.c (registered by _PG_init: WfSensitivePlans) */
enum
{
	PLAN_TENANT_KEY = 0,
	PLAN_TENANT_KEY_INSERT,
	PLAN_TENANT_KEY_REWRAP,
	PLAN_TENANT_KEY_MAX,
	PLAN_TENANT_KEY_CURRENT,
	PLAN_TENANT_KEYS_LIVE,
	PLAN_TENANT_KEYS_DESTROY
};

static const WfPlanSpec sensitive_plan_specs[] = {
	[PLAN_TENANT_KEY] = {
		"tenant_key",
		"SELECT k.master_key_id, k.wrapped FROM wf.tenant_keys k "
		"WHERE k.tenant_id OPERATOR(pg_catalog.=) $1 AND k.key_id OPERATOR(pg_catalog.=) $2",
		2, {TEXTOID, INT4OID}
	},
	[PLAN_TENANT_KEY_INSERT] = {
		"tenant_key_insert",
		"INSERT INTO wf.tenant_keys (tenant_id, key_id, master_key_id, wrapped, created_at) "
		"VALUES ($1, $2, $3, $4, pg_catalog.clock_timestamp())",
		4, {TEXTOID, INT4OID, TEXTOID, BYTEAOID}
	},
	[PLAN_TENANT_KEY_REWRAP] = {
		"tenant_key_rewrap",
		"UPDATE wf.tenant_keys k SET master_key_id = $3, wrapped = $4 "
		"WHERE k.tenant_id OPERATOR(pg_catalog.=) $1 AND k.key_id OPERATOR(pg_catalog.=) $2",
		4, {TEXTOID, INT4OID, TEXTOID, BYTEAOID}
	},
	[PLAN_TENANT_KEY_MAX] = {
		"tenant_key_max",
		"SELECT pg_catalog.max(k.key_id) FROM wf.tenant_keys k "
		"WHERE k.tenant_id OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
	[PLAN_TENANT_KEY_CURRENT] = {
		"tenant_key_current",
		"SELECT k.key_id FROM wf.tenant_keys k "
		"WHERE k.tenant_id OPERATOR(pg_catalog.=) $1 AND k.wrapped IS NOT NULL "
		"ORDER BY k.key_id DESC LIMIT 1",
		1, {TEXTOID}
	},
	[PLAN_TENANT_KEYS_LIVE] = {
		"tenant_keys_live",
		"SELECT k.tenant_id, k.key_id FROM wf.tenant_keys k WHERE k.wrapped IS NOT NULL "
		"ORDER BY 1, 2 FOR UPDATE",
		0, {InvalidOid}
	},
	[PLAN_TENANT_KEYS_DESTROY] = {
		"tenant_keys_destroy",
		"UPDATE wf.tenant_keys k SET wrapped = NULL, destroyed_at = pg_catalog.clock_timestamp() "
		"WHERE k.tenant_id OPERATOR(pg_catalog.=) $1 AND k.wrapped IS NOT NULL",
		1, {TEXTOID}
	},
};

WfPlanTable WfSensitivePlans = WF_PLAN_TABLE("sensitive", sensitive_plan_specs);

/* the columns of tenant_keys_live */
enum
{
	TENANT_KEYS_LIVE_COL_TENANT_ID = 1,
	TENANT_KEYS_LIVE_COL_KEY_ID
};

/* the columns of tenant_key */
enum
{
	TENANT_KEY_COL_MASTER_KEY_ID = 1,
	TENANT_KEY_COL_WRAPPED
};


#define WF_ENVELOPE_PREFIX "wfenc:v1:"
#define WF_RESERVED_PREFIX "wfenc:"	/* of every envelope version */
#define WF_RESERVED_PREFIX_LEN 6
#define WF_DATA_KEY_BYTES crypto_aead_xchacha20poly1305_ietf_KEYBYTES
#define WF_NONCE_BYTES crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
#define WF_TAG_BYTES crypto_aead_xchacha20poly1305_ietf_ABYTES
#define WF_MASTER_ID_LEN 32

/* one unwrapped data key, cached in this backend */
typedef struct DataKey
{
	char		tenant[64];
	int32		key_id;
	uint8		key[WF_DATA_KEY_BYTES];
} DataKey;

#define WF_DATA_KEY_CACHE 16
static void WfSensitiveReset(void);

static DataKey key_cache[WF_DATA_KEY_CACHE];
static int	key_cache_n = 0;
static char *cached_master_keys = NULL;	/* wfengine.master_keys the cache is for */

/* forward declarations */
static bool master_key(const char *id, uint8 *key, char *current_id);
static void data_key_ad(const char *tenant, int32 key_id, StringInfo ad);
static const uint8 *data_key(const char *tenant, int32 key_id, bool missing_ok);
static int32 current_data_key(const char *tenant);
static int32 new_data_key(const char *tenant);
static char *seal_value(const char *tenant, JsonbValue *v);
static uint8 *parse_envelope(const char *text, int len, int32 *key_id, size_t *boxlen);
static Jsonb *open_envelope(const char *tenant, const char *text, int len, char **damage);
static bool is_envelope(const JsonbValue *v);
static Jsonb *open_all(const char *tenant, Jsonb *value, char **damage);
static bool has_envelope(Jsonb *value);
static bool may_hold_reserved(Jsonb *value);

/*
 * WfSensitiveReset forgets the cached data keys (wiping them).
 */
static void
WfSensitiveReset(void)
{
	sodium_memzero(key_cache, sizeof(key_cache));
	key_cache_n = 0;
	if (cached_master_keys != NULL)
	{
		sodium_memzero(cached_master_keys, strlen(cached_master_keys));
		pfree(cached_master_keys);
	}
	cached_master_keys = NULL;
}

/*
 * master_key finds the master key id in wfengine.master_keys (id NULL:
 * the first, the current one) and writes it to key; current_id, when not
 * NULL, receives the id found.  False when there is no such key.
 */
static bool
master_key(const char *id, uint8 *key, char *current_id)
{
	char	   *list;
	char	   *tok;
	char	   *save = NULL;
	bool		found = false;

	if (wf_master_keys == NULL || wf_master_keys[0] == '\0')
		return false;
	list = pstrdup(wf_master_keys);
	for (tok = strtok_r(list, ",", &save); tok != NULL && !found;
		 tok = strtok_r(NULL, ",", &save))
	{
		char	   *colon;
		size_t		binlen = 0;

		while (*tok == ' ')
			tok++;
		colon = strchr(tok, ':');
		if (colon == NULL || colon - tok == 0 || colon - tok >= WF_MASTER_ID_LEN)
			continue;
		*colon = '\0';
		if (id != NULL && strcmp(tok, id) != 0)
			continue;
		if (sodium_hex2bin(key, WF_DATA_KEY_BYTES, colon + 1, strlen(colon + 1),
						   " ", &binlen, NULL) != 0 || binlen != WF_DATA_KEY_BYTES)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("master key \"%s\" of wfengine.master_keys is not 32 bytes in hex", tok)));
		if (current_id != NULL)
			strlcpy(current_id, tok, WF_MASTER_ID_LEN);
		found = true;
	}
	sodium_memzero(list, strlen(wf_master_keys));
	pfree(list);
	return found;
}

/*
 * data_key_ad is the associated data of a wrapped data key.
 */
static void
data_key_ad(const char *tenant, int32 key_id, StringInfo ad)
{
	initStringInfo(ad);
	appendStringInfo(ad, "wfengine-data-key:%s:%d", tenant, key_id);
}

/*
 * data_key returns data key key_id of tenant, unwrapped (cached).  A key
 * the tenant does not have is an error, or NULL when missing_ok (an
 * envelope naming it is damaged).
 */
static const uint8 *
data_key(const char *tenant, int32 key_id, bool missing_ok)
{
	Datum		values[2];
	bool		isnull;
	Datum		d;
	char	   *master_id;
	bytea	   *wrapped;
	uint8		mkey[WF_DATA_KEY_BYTES];
	unsigned long long plen;
	StringInfoData ad;
	DataKey    *dk;
	int			i;

	/* the cache holds keys opened under the master keys set now */
	if (key_cache_n > 0 &&
		(cached_master_keys == NULL || wf_master_keys == NULL ||
		 strcmp(cached_master_keys, wf_master_keys) != 0))
		WfSensitiveReset();
	for (i = 0; i < key_cache_n; i++)
		if (key_cache[i].key_id == key_id && strcmp(key_cache[i].tenant, tenant) == 0)
			return key_cache[i].key;

	values[0] = CStringGetTextDatum(tenant);
	values[1] = Int32GetDatum(key_id);
	if (WfPlanExec(&WfSensitivePlans, PLAN_TENANT_KEY, values, NULL, false, 1, SPI_OK_SELECT) != 1)
	{
		if (missing_ok)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("data key %d of tenant \"%s\" does not exist", key_id, tenant)));
	}
	d = WfGetDatum(0, TENANT_KEY_COL_WRAPPED, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("data key %d of tenant \"%s\" was destroyed", key_id, tenant),
				 errdetail("The sensitive values sealed under it can no longer be read.")));
	master_id = WfGetTextOrNull(0, TENANT_KEY_COL_MASTER_KEY_ID);
	wrapped = DatumGetByteaPP(d);
	if (!master_key(master_id, mkey, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("master key \"%s\" is not configured", master_id),
				 errdetail("Data key %d of tenant \"%s\" is wrapped under it.", key_id, tenant),
				 errhint("Add \"%s:<hex>\" to wfengine.master_keys.", master_id)));
	if (VARSIZE_ANY_EXHDR(wrapped) != WF_NONCE_BYTES + WF_DATA_KEY_BYTES + WF_TAG_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("data key %d of tenant \"%s\" is damaged", key_id, tenant)));

	if (key_cache_n == WF_DATA_KEY_CACHE)
	{
		sodium_memzero(&key_cache[0], sizeof(DataKey));
		memmove(&key_cache[0], &key_cache[1], sizeof(DataKey) * (WF_DATA_KEY_CACHE - 1));
		key_cache_n--;
	}
	dk = &key_cache[key_cache_n];
	data_key_ad(tenant, key_id, &ad);
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(dk->key, &plen, NULL,
												   (const uint8 *) VARDATA_ANY(wrapped) + WF_NONCE_BYTES,
												   WF_DATA_KEY_BYTES + WF_TAG_BYTES,
												   (const uint8 *) ad.data, ad.len,
												   (const uint8 *) VARDATA_ANY(wrapped), mkey) != 0)
	{
		sodium_memzero(mkey, sizeof(mkey));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PASSWORD),
				 errmsg("master key \"%s\" does not open data key %d of tenant \"%s\"",
						master_id, key_id, tenant),
				 errhint("wfengine.master_keys holds another key under that id.")));
	}
	sodium_memzero(mkey, sizeof(mkey));
	strlcpy(dk->tenant, tenant, sizeof(dk->tenant));
	dk->key_id = key_id;
	key_cache_n++;
	if (cached_master_keys == NULL)
		cached_master_keys = MemoryContextStrdup(TopMemoryContext, wf_master_keys);
	return dk->key;
}

/*
 * wrap_and_store wraps key under the current master key and stores it as
 * data key key_id of tenant (insert, or update for a re-wrap).
 */
static void
wrap_and_store(const char *tenant, int32 key_id, const uint8 *key, bool update)
{
	uint8		mkey[WF_DATA_KEY_BYTES];
	char		mid[WF_MASTER_ID_LEN];
	bytea	   *wrapped = palloc(VARHDRSZ + WF_NONCE_BYTES + WF_DATA_KEY_BYTES + WF_TAG_BYTES);
	uint8	   *w = (uint8 *) VARDATA(wrapped);
	unsigned long long clen;
	StringInfoData ad;
	Datum		values[4];

	if (!master_key(NULL, mkey, mid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("sensitive fields need wfengine.master_keys"),
				 errhint("A superuser sets wfengine.master_keys to \"<id>:<32 bytes in hex>\", e.g. \"k1:\" followed by the output of \"openssl rand -hex 32\".")));
	SET_VARSIZE(wrapped, VARHDRSZ + WF_NONCE_BYTES + WF_DATA_KEY_BYTES + WF_TAG_BYTES);
	randombytes_buf(w, WF_NONCE_BYTES);
	data_key_ad(tenant, key_id, &ad);
	crypto_aead_xchacha20poly1305_ietf_encrypt(w + WF_NONCE_BYTES, &clen, key, WF_DATA_KEY_BYTES,
											   (const uint8 *) ad.data, ad.len, NULL, w, mkey);
	sodium_memzero(mkey, sizeof(mkey));
	values[0] = CStringGetTextDatum(tenant);
	values[1] = Int32GetDatum(key_id);
	values[2] = CStringGetTextDatum(mid);
	values[3] = PointerGetDatum(wrapped);
	WfPlanExec(&WfSensitivePlans, update ? PLAN_TENANT_KEY_REWRAP : PLAN_TENANT_KEY_INSERT, values, NULL,
			   false, 0, update ? SPI_OK_UPDATE : SPI_OK_INSERT);
}

/*
 * new_data_key makes the next data key of tenant and returns its id.
 */
static int32
new_data_key(const char *tenant)
{
	uint8		key[WF_DATA_KEY_BYTES];
	Datum		values[1];
	bool		isnull;
	Datum		d;
	int32		key_id;

	values[0] = CStringGetTextDatum(tenant);
	WfPlanExec(&WfSensitivePlans, PLAN_TENANT_KEY_MAX, values, NULL, false, 1, SPI_OK_SELECT);
	d = WfGetDatum(0, 1, &isnull);
	key_id = isnull ? 1 : DatumGetInt32(d) + 1;
	crypto_aead_xchacha20poly1305_ietf_keygen(key);
	wrap_and_store(tenant, key_id, key, false);
	sodium_memzero(key, sizeof(key));
	return key_id;
}

/*
 * current_data_key returns the id of tenant's newest live data key,
 * making the first one when it has none.
 */
static int32
current_data_key(const char *tenant)
{
	Datum		values[1];

	values[0] = CStringGetTextDatum(tenant);
	if (WfPlanExec(&WfSensitivePlans, PLAN_TENANT_KEY_CURRENT, values, NULL, false, 1, SPI_OK_SELECT) == 1)
		return DatumGetInt32(WfGetDatumNotNull(0, 1));
	return new_data_key(tenant);
}

/*
 * seal_value returns the envelope of the JSON value v.
 */
static char *
seal_value(const char *tenant, JsonbValue *v)
{
	int32		key_id = current_data_key(tenant);
	const uint8 *key = data_key(tenant, key_id, false);
	Jsonb	   *j = JsonbValueToJsonb(v);
	char	   *plain = JsonbToCString(NULL, &j->root, VARSIZE(j));
	size_t		plen = strlen(plain);
	uint8	   *box = palloc(WF_NONCE_BYTES + plen + WF_TAG_BYTES);
	unsigned long long clen;
	StringInfoData ad;
	size_t		b64len = sodium_base64_ENCODED_LEN(WF_NONCE_BYTES + plen + WF_TAG_BYTES,
												   sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	char	   *b64 = palloc(b64len);

	randombytes_buf(box, WF_NONCE_BYTES);
	initStringInfo(&ad);
	appendStringInfo(&ad, "wfengine-value:%s:%d", tenant, key_id);
	crypto_aead_xchacha20poly1305_ietf_encrypt(box + WF_NONCE_BYTES, &clen, (const uint8 *) plain,
											   plen, (const uint8 *) ad.data, ad.len, NULL, box, key);
	sodium_memzero(plain, plen);
	sodium_bin2base64(b64, b64len, box, WF_NONCE_BYTES + clen,
					  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	return psprintf("%s%d:%s", WF_ENVELOPE_PREFIX, key_id, b64);
}

/*
 * is_envelope tells whether v is an envelope string.
 */
static bool
is_envelope(const JsonbValue *v)
{
	return v->type == jbvString && v->val.string.len > (int) strlen(WF_ENVELOPE_PREFIX) &&
		strncmp(v->val.string.val, WF_ENVELOPE_PREFIX, strlen(WF_ENVELOPE_PREFIX)) == 0;
}

/*
 * parse_envelope splits an envelope "wfenc:v1:<key id>:<base64>" of len
 * bytes into its key id and its box (nonce, ciphertext and tag), which it
 * returns palloc'd with its length in *boxlen; NULL when the text does not
 * have that form.  Pure.
 */
static uint8 *
parse_envelope(const char *text, int len, int32 *key_id, size_t *boxlen)
{
	const char *p = text + strlen(WF_ENVELOPE_PREFIX);
	const char *end = text + len;
	const char *digits = p;
	int64		id = 0;
	uint8	   *box;

	if (len <= (int) strlen(WF_ENVELOPE_PREFIX) ||
		strncmp(text, WF_ENVELOPE_PREFIX, strlen(WF_ENVELOPE_PREFIX)) != 0)
		return NULL;
	while (p < end && *p >= '0' && *p <= '9' && p - digits < 9)
		id = id * 10 + (*p++ - '0');
	if (p == digits || p >= end || *p != ':' || id <= 0)
		return NULL;
	p++;
	box = palloc(len);
	*boxlen = 0;
	if (sodium_base642bin(box, len, p, end - p, NULL, boxlen, NULL,
						  sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
		*boxlen < WF_NONCE_BYTES + WF_TAG_BYTES)
	{
		pfree(box);
		return NULL;
	}
	*key_id = (int32) id;
	return box;
}

/* the message of a malformed envelope */
#define WF_DAMAGED_MSG "a sealed value is damaged"
#define WF_DAMAGED_DETAIL "A sealed value has the form " WF_ENVELOPE_PREFIX \
	"<key id>:<base64 of nonce, ciphertext and tag>."

/*
 * WfParseEnvelope is parse_envelope for callers that want an error for a
 * damaged envelope (22P02: it is data, which a user may have written).
 * It needs no key and runs no query (the fuzz harness calls it).
 */
uint8 *
WfParseEnvelope(const char *text, int len, int32 *key_id, size_t *boxlen)
{
	uint8	   *box = parse_envelope(text, len, key_id, boxlen);

	if (box == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg(WF_DAMAGED_MSG),
				 errdetail(WF_DAMAGED_DETAIL)));
	return box;
}

/*
 * WfOpenBox decrypts a box with key, bound to the associated data ad:
 * the plain text, NUL-terminated, or NULL when it does not open.  Pure.
 */
char *
WfOpenBox(const uint8 *box, size_t boxlen, const uint8 *key, const char *ad, int adlen)
{
	char	   *plain = palloc(boxlen + 1);
	unsigned long long plen;

	if (boxlen < WF_NONCE_BYTES + WF_TAG_BYTES ||
		crypto_aead_xchacha20poly1305_ietf_decrypt((uint8 *) plain, &plen, NULL,
												   box + WF_NONCE_BYTES, boxlen - WF_NONCE_BYTES,
												   (const uint8 *) ad, adlen, box, key) != 0)
		return NULL;
	plain[plen] = '\0';
	return plain;
}

/*
 * damaged_envelope reports a damaged envelope for open_envelope: an error
 * with a data-exception code, or, when damage is not NULL, NULL with the
 * message in *damage.
 */
static Jsonb *
damaged_envelope(char **damage, char *message, const char *detail)
{
	if (damage != NULL)
	{
		*damage = message;
		return NULL;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("%s", message),
			 errdetail("%s", detail)));
	pg_unreachable();
}

/*
 * open_envelope returns the JSON value sealed in an envelope of tenant.
 * A damaged envelope (malformed, naming a data key the tenant does not
 * have, or not opening with it) is an error with a data-exception code,
 * or, when damage is not NULL, gives NULL with the message in *damage.
 * A missing or wrong master key and a destroyed data key are errors
 * either way (configuration, not data).
 */
static Jsonb *
open_envelope(const char *tenant, const char *text, int len, char **damage)
{
	int32		key_id = 0;
	size_t		boxlen;
	uint8	   *box = parse_envelope(text, len, &key_id, &boxlen);
	const uint8 *key;
	char	   *plain;
	StringInfoData ad;
	Jsonb	   *result;

	if (box == NULL)
		return damaged_envelope(damage, pstrdup(WF_DAMAGED_MSG), WF_DAMAGED_DETAIL);
	key = data_key(tenant, key_id, true);
	if (key == NULL)
		return damaged_envelope(damage,
								psprintf("a sealed value names data key %d, which tenant \"%s\" does not have",
										 key_id, tenant),
								"It was changed, or sealed for another tenant.");
	initStringInfo(&ad);
	appendStringInfo(&ad, "wfengine-value:%s:%d", tenant, key_id);
	plain = WfOpenBox(box, boxlen, key, ad.data, ad.len);
	if (plain == NULL)
		return damaged_envelope(damage,
								psprintf("a sealed value does not open with data key %d of tenant \"%s\"",
										 key_id, tenant),
								"It was changed, or sealed for another tenant.");
	result = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(plain)));
	sodium_memzero(plain, strlen(plain));
	return result;
}

/*
 * key_is_one_of tells whether the object key k is one of keys.
 */
static bool
key_is_one_of(const JsonbValue *k, char **keys, int nkeys)
{
	int			i;

	for (i = 0; i < nkeys; i++)
		if ((size_t) k->val.string.len == strlen(keys[i]) &&
			strncmp(k->val.string.val, keys[i], k->val.string.len) == 0)
			return true;
	return false;
}

/*
 * A ValueReplacer gives the string that replaces the value v of a
 * top-level key of an object (named: the key is one of the keys asked
 * for), or NULL to keep it.
 */
typedef char *(*ValueReplacer) (JsonbValue *v, bool named, void *arg);

/*
 * replace_values returns the object obj with the values of its top-level
 * keys that replace picks replaced by the strings it gives, for
 * WfSealKeys and WfMaskSealed.
 */
static Jsonb *
replace_values(Jsonb *obj, char **keys, int nkeys, ValueReplacer replace, void *arg)
{
	JsonbParseState *state = NULL;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	JsonbValue *res = NULL;
	bool		named = false;
	char	   *replacement;

	it = JsonbIteratorInit(&obj->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			named = key_is_one_of(&v, keys, nkeys);
			res = pushJsonbValue(&state, tok, &v);
		}
		else if (tok == WJB_VALUE && (replacement = replace(&v, named, arg)) != NULL)
		{
			JsonbValue	sv;

			sv.type = jbvString;
			sv.val.string.val = replacement;
			sv.val.string.len = strlen(replacement);
			res = pushJsonbValue(&state, tok, &sv);
		}
		else
			res = pushJsonbValue(&state, tok, (tok == WJB_BEGIN_OBJECT || tok == WJB_END_OBJECT) ? NULL : &v);
	}
	return JsonbValueToJsonb(res);
}

/*
 * seal_named is WfSealKeys's ValueReplacer (arg: the tenant): the
 * envelope of a value of the keys, unless it is null or sealed already.
 */
static char *
seal_named(JsonbValue *v, bool named, void *arg)
{
	if (!named || v->type == jbvNull || is_envelope(v))
		return NULL;
	return seal_value((const char *) arg, v);
}

/*
 * WfSealKeys returns obj with the values of keys sealed (values that are
 * envelopes already, null or absent are left as they are).  Inside an API
 * call.
 */
Jsonb *
WfSealKeys(const char *tenant, Jsonb *obj, char **keys, int nkeys)
{
	if (obj == NULL || nkeys == 0 || !JB_ROOT_IS_OBJECT(obj) || JB_ROOT_IS_SCALAR(obj))
		return obj;
	return replace_values(obj, keys, nkeys, seal_named, (void *) tenant);
}

/*
 * mask_sealed is WfMaskSealed's ValueReplacer: the marker for a non-null
 * value of the keys and for an envelope.
 */
static char *
mask_sealed(JsonbValue *v, bool named, void *arg)
{
	if ((named && v->type != jbvNull) || is_envelope(v))
		return WF_RESERVED_PREFIX "sealed";
	return NULL;
}

/*
 * WfMaskSealed returns obj (a run input) with every value that is or would
 * be sealed replaced by the same marker: the non-null values of keys, and
 * envelopes at any top-level key.  Two inputs that differ only in sealed
 * values mask alike.  The marker begins with "wfenc:", which no input a
 * caller gives may (WfRefuseSealedLookalikes), so it equals no real value.
 */
Jsonb *
WfMaskSealed(Jsonb *obj, char **keys, int nkeys)
{
	if (obj == NULL || !JB_ROOT_IS_OBJECT(obj) || JB_ROOT_IS_SCALAR(obj) ||
		(nkeys == 0 && !has_envelope(obj)))
		return obj;
	return replace_values(obj, keys, nkeys, mask_sealed, NULL);
}

/*
 * open_all returns value with every envelope of tenant opened.  A damaged
 * envelope is an error, or, when damage is not NULL, gives NULL with the
 * message in *damage (see open_envelope).
 */
static Jsonb *
open_all(const char *tenant, Jsonb *value, char **damage)
{
	JsonbParseState *state = NULL;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	JsonbValue *res = NULL;

	if (value == NULL)
		return NULL;
	if (JB_ROOT_IS_SCALAR(value))
	{
		JsonbValue	sv;

		if (JsonbExtractScalar(&value->root, &sv) && is_envelope(&sv))
			return open_envelope(tenant, sv.val.string.val, sv.val.string.len, damage);
		return value;
	}
	it = JsonbIteratorInit(&value->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if ((tok == WJB_VALUE || tok == WJB_ELEM) && is_envelope(&v))
		{
			Jsonb	   *opened = open_envelope(tenant, v.val.string.val, v.val.string.len, damage);
			JsonbValue	ov;

			if (opened == NULL)
				return NULL;
			if (JB_ROOT_IS_SCALAR(opened))
				(void) JsonbExtractScalar(&opened->root, &ov);
			else
			{
				ov.type = jbvBinary;
				ov.val.binary.data = &opened->root;
				ov.val.binary.len = VARSIZE(opened) - VARHDRSZ;
			}
			res = pushJsonbValue(&state, tok, &ov);
		}
		else
			res = pushJsonbValue(&state, tok,
								 (tok == WJB_BEGIN_OBJECT || tok == WJB_END_OBJECT ||
								  tok == WJB_BEGIN_ARRAY || tok == WJB_END_ARRAY) ? NULL : &v);
	}
	return JsonbValueToJsonb(res);
}

/*
 * find_bytes tells whether the len bytes at data hold the n bytes of pat
 * (n > 0): a scan for the first byte, then a compare.
 */
static bool
find_bytes(const char *data, size_t len, const char *pat, size_t n)
{
	const char *p = data;
	const char *end = data + len;

	while ((size_t) (end - p) >= n)
	{
		p = memchr(p, pat[0], (end - p) - n + 1);
		if (p == NULL)
			return false;
		if (memcmp(p, pat, n) == 0)
			return true;
		p++;
	}
	return false;
}

/*
 * has_envelope tells whether value may hold an envelope: most values do
 * not, and looking for the prefix in the bytes is cheaper than walking it.
 * (A jsonb holds its strings unescaped, so an envelope is always there as
 * it is.)
 */
static bool
has_envelope(Jsonb *value)
{
	return find_bytes((const char *) VARDATA(value), VARSIZE(value) - VARHDRSZ,
					  WF_ENVELOPE_PREFIX, strlen(WF_ENVELOPE_PREFIX));
}

/*
 * may_hold_reserved tells whether value may hold a string that begins with
 * the reserved prefix, by looking for the prefix in its bytes.
 */
static bool
may_hold_reserved(Jsonb *value)
{
	return find_bytes((const char *) VARDATA(value), VARSIZE(value) - VARHDRSZ,
					  WF_RESERVED_PREFIX, WF_RESERVED_PREFIX_LEN);
}

/* one container on the way to a value, for the path of a refusal */
typedef struct PathStep
{
	bool		is_array;
	int			count;			/* array: elements seen so far */
	const char *key;			/* object: the current key (in the jsonb) */
	int			keylen;
} PathStep;

/* the longest path a refusal names; a longer one keeps its two ends */
#define WF_MAX_PATH_TEXT 200

/*
 * path_text writes the JSON path of the value the steps lead to ($, .key,
 * ."odd key", [n]), shortened in the middle beyond WF_MAX_PATH_TEXT bytes
 * (between two steps where it can).  On the error path only.
 */
static char *
path_text(PathStep *steps, int depth, bool raw_scalar)
{
	StringInfoData buf;
	int		   *starts = palloc(sizeof(int) * (depth + 1));
	int			nstarts = 0;
	int			i;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '$');
	for (i = raw_scalar ? 1 : 0; i < depth; i++)
	{
		starts[nstarts++] = buf.len;
		if (steps[i].is_array)
			appendStringInfo(&buf, "[%d]", steps[i].count - 1);
		else
		{
			bool		plain = steps[i].keylen > 0 &&
				!(steps[i].key[0] >= '0' && steps[i].key[0] <= '9');
			int			j;

			for (j = 0; j < steps[i].keylen && plain; j++)
			{
				char		c = steps[i].key[j];

				plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
					(c >= '0' && c <= '9') || c == '_';
			}
			appendStringInfoChar(&buf, '.');
			if (plain)
				appendBinaryStringInfo(&buf, steps[i].key, steps[i].keylen);
			else
				escape_json(&buf, pnstrdup(steps[i].key, steps[i].keylen));
		}
	}
	if (buf.len > WF_MAX_PATH_TEXT)
	{
		int			head = 0;
		int			tail = buf.len;

		for (i = 0; i < nstarts; i++)
		{
			if (starts[i] <= WF_MAX_PATH_TEXT / 2)
				head = starts[i];
			if (buf.len - starts[i] <= WF_MAX_PATH_TEXT / 2 && tail == buf.len)
				tail = starts[i];
		}
		if (head <= 1 || tail == buf.len)
		{
			/* a step longer than half the limit: cut between characters */
			head = pg_mbcliplen(buf.data, buf.len, WF_MAX_PATH_TEXT / 2);
			tail = head;
			while (tail < buf.len - WF_MAX_PATH_TEXT / 2)
				tail += pg_mblen(buf.data + tail);
		}
		return psprintf("%.*s...%s", head, buf.data, buf.data + tail);
	}
	return buf.data;
}

/*
 * WfRefuseSealedLookalikes refuses a JSON value a caller gives (what of
 * owner, as in "input" of "a run of definition \"x\"") that holds a string
 * value, at any depth, beginning with "wfenc:": that prefix is reserved
 * for the envelopes the engine seals, so that a value a caller gives is
 * never taken for one.  Object keys are not values and may begin with it.
 * A value whose bytes do not hold the prefix at all (nearly every value)
 * is passed after one scan of its bytes; otherwise one pass of an
 * iterator finds the value, allocating nothing per string.  Pure: called
 * before an API call begins.
 */
void
WfRefuseSealedLookalikes(Jsonb *value, const char *what, const char *owner)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	PathStep	local[32];
	PathStep   *steps = local;
	int			maxdepth = lengthof(local);
	int			depth = 0;

	if (value == NULL || !may_hold_reserved(value))
		return;
	it = JsonbIteratorInit(&value->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		switch (tok)
		{
			case WJB_BEGIN_ARRAY:
			case WJB_BEGIN_OBJECT:
				if (depth > 0 && steps[depth - 1].is_array)
					steps[depth - 1].count++;
				if (depth == maxdepth)
				{
					PathStep   *more = palloc(sizeof(PathStep) * maxdepth * 2);

					memcpy(more, steps, sizeof(PathStep) * maxdepth);
					if (steps != local)
						pfree(steps);
					steps = more;
					maxdepth *= 2;
				}
				steps[depth].is_array = (tok == WJB_BEGIN_ARRAY);
				steps[depth].count = 0;
				steps[depth].key = NULL;
				steps[depth].keylen = 0;
				depth++;
				break;
			case WJB_END_ARRAY:
			case WJB_END_OBJECT:
				depth--;
				break;
			case WJB_KEY:
				steps[depth - 1].key = v.val.string.val;
				steps[depth - 1].keylen = v.val.string.len;
				break;
			case WJB_ELEM:
			case WJB_VALUE:
				if (tok == WJB_ELEM)
					steps[depth - 1].count++;
				if (v.type == jbvString && v.val.string.len >= WF_RESERVED_PREFIX_LEN &&
					memcmp(v.val.string.val, WF_RESERVED_PREFIX, WF_RESERVED_PREFIX_LEN) == 0)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("%s of %s has a value at %s that begins with \"%s\"",
									what, owner,
									path_text(steps, depth, JB_ROOT_IS_SCALAR(value)),
									WF_RESERVED_PREFIX),
							 errhint("Strings beginning with \"%s\" are reserved for the values the engine seals; give the value in another form.",
									 WF_RESERVED_PREFIX)));
				break;
			case WJB_DONE:
				break;
		}
	}
	if (steps != local)
		pfree(steps);
}

/*
 * WfRefuseSealedLookalikeText is WfRefuseSealedLookalikes for a text
 * argument that the engine stores as a JSON string (what of owner).
 */
void
WfRefuseSealedLookalikeText(const char *value, const char *what, const char *owner)
{
	if (value != NULL && strncmp(value, WF_RESERVED_PREFIX, WF_RESERVED_PREFIX_LEN) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s of %s begins with \"%s\"", what, owner, WF_RESERVED_PREFIX),
				 errhint("Strings beginning with \"%s\" are reserved for the values the engine seals; give the value in another form.",
						 WF_RESERVED_PREFIX)));
}

/*
 * wfengine_refuse_sealed_lookalikes is wf._refuse_sealed_lookalikes(value,
 * what, owner), WfRefuseSealedLookalikes for the functions written in
 * PL/pgSQL (wf.schedule, wf.send_event).
 */
Datum
wfengine_refuse_sealed_lookalikes(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_VOID();
	WfRefuseSealedLookalikes(PG_GETARG_JSONB_P(0),
							 PG_ARGISNULL(1) ? "value" : text_to_cstring(PG_GETARG_TEXT_PP(1)),
							 PG_ARGISNULL(2) ? "an argument" : text_to_cstring(PG_GETARG_TEXT_PP(2)));
	PG_RETURN_VOID();
}

/*
 * digest_key derives the key of tenant's input digests from the channel
 * key of wf.secrets (32 random bytes made once per install, readable by
 * the extension's owner only): BLAKE2b-256 keyed by it over a label and
 * the tenant.  Inside an API call.
 */
static void
digest_key(const char *tenant, uint8 *key)
{
	const uint8 *secret;
	size_t		secretlen;
	StringInfoData label;

	WfChannelKey(&secret, &secretlen);
	initStringInfo(&label);
	appendStringInfo(&label, "wfengine-input-digest:v1:%s", tenant);
	if (secretlen < crypto_generichash_KEYBYTES_MIN || secretlen > crypto_generichash_KEYBYTES_MAX ||
		crypto_generichash(key, WF_HASH_LEN, (const uint8 *) label.data, label.len,
						   secret, secretlen) != 0)
		elog(ERROR, "could not derive the input digest key");
}

/*
 * hash_len_bytes feeds a tag, a length and the bytes.
 */
static void
hash_len_bytes(crypto_generichash_state *st, char tag, const char *data, size_t len)
{
	uint8		hdr[9];
	uint64		n = len;
	int			i;

	hdr[0] = (uint8) tag;
	for (i = 8; i >= 1; i--)
	{
		hdr[i] = (uint8) (n & 0xff);
		n >>= 8;
	}
	crypto_generichash_update(st, hdr, sizeof(hdr));
	if (len > 0)
		crypto_generichash_update(st, (const uint8 *) data, len);
}

/*
 * WfInputDigest returns the keyed digest (BLAKE2b-256, WF_HASH_LEN bytes in
 * a bytea) of a run's plain input: keyed per tenant (digest_key), over the
 * run id and a canonical encoding of the input (jsonb's own order of keys;
 * each token tagged, strings and numbers length-delimited, numbers without
 * insignificant zeros), so two inputs have one digest exactly when they
 * are equal jsonb values.  The run id makes the digests of two runs
 * incomparable, so that equal inputs of two runs cannot be told from the
 * stored digests.  Inside an API call.
 */
bytea *
WfInputDigest(const char *tenant, const pg_uuid_t *run_id, Jsonb *input)
{
	uint8		key[WF_HASH_LEN];
	crypto_generichash_state st;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	bytea	   *out = palloc(VARHDRSZ + WF_HASH_LEN);

	digest_key(tenant, key);
	crypto_generichash_init(&st, key, sizeof(key), WF_HASH_LEN);
	sodium_memzero(key, sizeof(key));
	crypto_generichash_update(&st, run_id->data, UUID_LEN);
	it = JsonbIteratorInit(&input->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		switch (tok)
		{
			case WJB_BEGIN_ARRAY:
				hash_len_bytes(&st, v.val.array.rawScalar ? 's' : '[', NULL, 0);
				break;
			case WJB_END_ARRAY:
				hash_len_bytes(&st, ']', NULL, 0);
				break;
			case WJB_BEGIN_OBJECT:
				hash_len_bytes(&st, '{', NULL, 0);
				break;
			case WJB_END_OBJECT:
				hash_len_bytes(&st, '}', NULL, 0);
				break;
			case WJB_KEY:
				hash_len_bytes(&st, 'k', v.val.string.val, v.val.string.len);
				break;
			case WJB_VALUE:
			case WJB_ELEM:
				switch (v.type)
				{
					case jbvNull:
						hash_len_bytes(&st, 'z', NULL, 0);
						break;
					case jbvBool:
						hash_len_bytes(&st, v.val.boolean ? 't' : 'f', NULL, 0);
						break;
					case jbvString:
						hash_len_bytes(&st, 'S', v.val.string.val, v.val.string.len);
						break;
					case jbvNumeric:
						{
							char	   *num = numeric_normalize(v.val.numeric);

							hash_len_bytes(&st, 'n', num, strlen(num));
							pfree(num);
						}
						break;
					default:
						elog(ERROR, "unexpected jsonb value type %d in a run input", (int) v.type);
				}
				break;
			case WJB_DONE:
				break;
		}
	}
	SET_VARSIZE(out, VARHDRSZ + WF_HASH_LEN);
	crypto_generichash_final(&st, (uint8 *) VARDATA(out), WF_HASH_LEN);
	return out;
}

/*
 * WfMaySeeSensitive tells whether the calling role (the outermost API
 * caller) is a member of wfengine_sensitive.
 */
bool
WfMaySeeSensitive(Oid caller)
{
	Oid			role = get_role_oid("wfengine_sensitive", true);

	return OidIsValid(role) && has_privs_of_role(caller, role);
}

/*
 * WfOpenForCaller returns value with its envelopes opened when the caller
 * may see sensitive values, else value itself.  A damaged envelope is an
 * error, or, when damage is not NULL, gives NULL with the message in
 * *damage.
 */
Jsonb *
WfOpenForCaller(const char *tenant, Oid caller, Jsonb *value, char **damage)
{
	if (value == NULL || !has_envelope(value) || !WfMaySeeSensitive(caller))
		return value;
	return open_all(tenant, value, damage);
}

/*
 * wfengine_decrypt is wf.decrypt(value): value with the envelopes of the
 * session's tenant opened, for members of wfengine_sensitive.
 */
Datum
wfengine_decrypt(PG_FUNCTION_ARGS)
{
	Jsonb	   *value = PG_GETARG_JSONB_P(0);
	Oid			caller = GetUserId();
	Jsonb	   *result;
	Jsonb	   *out;

	if (!WfMaySeeSensitive(caller))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" may not read sensitive values",
						GetUserNameFromId(caller, false)),
				 errhint("Members of wfengine_sensitive may.")));
	WfApiBegin();
	result = open_all(WfCurrentTenant(), value, NULL);
	out = (Jsonb *) SPI_palloc(VARSIZE(result));
	memcpy(out, result, VARSIZE(result));
	WfApiEnd();
	PG_RETURN_JSONB_P(out);
}

/*
 * wfengine_rotate_tenant_key is wf.rotate_tenant_key(tenant): new values
 * are sealed under a new data key; returns its id.
 */
Datum
wfengine_rotate_tenant_key(PG_FUNCTION_ARGS)
{
	char	   *tenant = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		key_id;

	WfApiBegin();
	key_id = new_data_key(tenant);
	WfApiEnd();
	PG_RETURN_INT32(key_id);
}

/*
 * wfengine_rewrap_tenant_keys is wf.rewrap_tenant_keys(): every live data
 * key is wrapped again under the current master key, so that older master
 * keys can be retired; returns how many.
 */
Datum
wfengine_rewrap_tenant_keys(PG_FUNCTION_ARGS)
{
	uint64		n;
	uint64		i;
	char	  **tenants;
	int32	   *ids;
	int			done = 0;

	WfApiBegin();
	n = WfPlanExec(&WfSensitivePlans, PLAN_TENANT_KEYS_LIVE, NULL, NULL, false, 0, SPI_OK_SELECT);
	tenants = palloc(sizeof(char *) * Max(n, 1));
	ids = palloc(sizeof(int32) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		tenants[i] = WfGetTextOrNull(i, TENANT_KEYS_LIVE_COL_TENANT_ID);
		ids[i] = DatumGetInt32(WfGetDatumNotNull(i, TENANT_KEYS_LIVE_COL_KEY_ID));
	}
	for (i = 0; i < n; i++)
	{
		uint8		key[WF_DATA_KEY_BYTES];

		memcpy(key, data_key(tenants[i], ids[i], false), sizeof(key));
		wrap_and_store(tenants[i], ids[i], key, true);
		sodium_memzero(key, sizeof(key));
		done++;
	}
	WfApiEnd();
	PG_RETURN_INT32(done);
}

/*
 * wfengine_destroy_tenant_keys is wf.destroy_tenant_keys(tenant, reason):
 * crypto-shredding; returns how many data keys were destroyed.
 */
Datum
wfengine_destroy_tenant_keys(PG_FUNCTION_ARGS)
{
	char	   *tenant = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Datum		values[1];
	uint64		n;

	WfApiBegin();
	values[0] = CStringGetTextDatum(tenant);
	n = WfPlanExec(&WfSensitivePlans, PLAN_TENANT_KEYS_DESTROY, values, NULL, false, 0, SPI_OK_UPDATE);
	WfSensitiveReset();
	WfApiEnd();
	PG_RETURN_INT32((int32) n);
}

/*
 * WfSensitiveInit asks the plan cache to forget the cached data keys with its plans (a new
 * install of the extension).  Called from _PG_init.
 */
void
WfSensitiveInit(void)
{
	WfRegisterResetCallback(WfSensitiveReset);
}
