/* router/wfengine_router--0.1.0--0.2.0.sql -- wfengine_router 0.1.0 to 0.2.0 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION wfengine_router UPDATE TO '0.2.0'" to load this file. \quit

/*
 * wfengine_router 0.1.0 was released with wfengine 0.2.0 and never changes
 * again (sql/released.sha256).  0.2.0 routes what wfengine 0.3.0 adds.
 * Update the routers after the shards (docs/scale-out.md, "A rolling
 * upgrade"): a shard still on wfengine 0.2.0 answers a call of a function
 * it does not have with 42883.
 */

-- wf.start_and_claim (wfengine 0.3.0, issue 31): routed by tenant, written
-- by router/gen_api.py from the last line of router/api.txt
CREATE FUNCTION wfrouter."p:start_and_claim"(definition text, input jsonb, worker text, lease interval DEFAULT '00:00:30'::interval, idempotency_key text DEFAULT NULL::text)
RETURNS TABLE(task_id bigint, run_id uuid, step text, attempt integer, fence bigint, idempotency_key text, input jsonb, lease_expires_at timestamp with time zone, queue text, activity text, deliveries integer)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.start_and_claim;
$$;

CREATE FUNCTION wfrouter."r:start_and_claim"(text, jsonb, text, interval, text)
RETURNS TABLE("o:task_id" bigint, "o:run_id" uuid, "o:step" text, "o:attempt" integer, "o:fence" bigint, "o:idempotency_key" text, "o:input" jsonb, "o:lease_expires_at" timestamp with time zone, "o:queue" text, "o:activity" text, "o:deliveries" integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tries integer := 0;
    st text;
    msg text;
    det text;
    hnt text;
BEGIN
    LOOP
        BEGIN
            RETURN QUERY SELECT * FROM wfrouter."p:start_and_claim"($1, $2, $3, $4, $5);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.start_and_claim(definition text, input jsonb, worker text, lease interval DEFAULT '00:00:30'::interval, idempotency_key text DEFAULT NULL::text)
RETURNS TABLE(task_id bigint, run_id uuid, step text, attempt integer, fence bigint, idempotency_key text, input jsonb, lease_expires_at timestamp with time zone, queue text, activity text, deliveries integer)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:start_and_claim"($1, $2, $3, $4, $5) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:start_and_claim"(text, jsonb, text, interval, text), wfrouter."r:start_and_claim"(text, jsonb, text, interval, text), wf.start_and_claim(text, jsonb, text, interval, text) TO wfengine_app;

REVOKE ALL ON FUNCTION wfrouter."p:start_and_claim"(text, jsonb, text, interval, text),
    wfrouter."r:start_and_claim"(text, jsonb, text, interval, text),
    wf.start_and_claim(text, jsonb, text, interval, text) FROM PUBLIC;
