/* wfengine_router--0.1.0.sql: the router of a sharded wfengine deployment */

\echo Use "CREATE EXTENSION wfengine_router CASCADE" to load this file. \quit

-- The router database holds no runs.  It has the shard list and the same
-- partition map every shard holds (wfshard.partitions there), and the wfengine
-- application API in schema wf as PL/Proxy functions that run the same
-- call on the shard of the caller's tenant, connecting onward as the
-- caller's own login (session_user).  A tenant is identified as on a
-- shard: the one wf_tenant_<name> role the session user is a member of
-- (superusers: "default").  A tenant's partition is hashtext(tenant) &
-- (partitions - 1), which is what PL/Proxy's RUN ON does with the hash
-- wfrouter.route() returns.  Run ids are random uuids and approval tokens
-- random too, so calls that name a run or a token are routed by the
-- caller's tenant as well: the tenant decides the shard, and the shard
-- refuses a tenant it does not own.  See docs/scale-out.md.

CREATE SCHEMA wfrouter;
COMMENT ON SCHEMA wfrouter IS 'wfengine_router: shards, partition map, routing';
CREATE SCHEMA wf;
COMMENT ON SCHEMA wf IS 'wfengine application API, routed to the shard of the caller''s tenant';
CREATE SCHEMA plproxy;
COMMENT ON SCHEMA plproxy IS 'PL/Proxy cluster configuration of wfengine_router (clusters "wfengine" and "wfengine_shards")';

-- the job roles, as wfengine makes them (they are roles of the cluster;
-- a router in a cluster of its own needs them too)
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['wfengine_app', 'wfengine_worker', 'wfengine_approver',
                             'wfengine_operator', 'wfengine_admin']
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) r) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
            IF r OPERATOR(pg_catalog.=) 'wfengine_operator' THEN
                GRANT wfengine_app TO wfengine_operator;
            ELSIF r OPERATOR(pg_catalog.=) 'wfengine_admin' THEN
                GRANT wfengine_operator TO wfengine_admin;
            END IF;
        END IF;
    END LOOP;
END
$$;

CREATE TABLE wfrouter.shards (
    shard text PRIMARY KEY CHECK (pg_catalog.length(shard) OPERATOR(pg_catalog.<=) 63),
    connstr text NOT NULL
);
COMMENT ON TABLE wfrouter.shards IS
'The shards: a name and a libpq connection string without user (PL/Proxy adds the caller''s login) and without password (use .pgpass, a pooler or certificates).';

CREATE TABLE wfrouter.partitions (
    partition integer PRIMARY KEY CHECK (partition OPERATOR(pg_catalog.>=) 0),
    shard text NOT NULL REFERENCES wfrouter.shards
);
COMMENT ON TABLE wfrouter.partitions IS
'The partition map: the shard of each hash partition of tenants; every shard holds the same map (wfshard.partitions).';

CREATE TABLE wfrouter.config (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    version integer NOT NULL
);
INSERT INTO wfrouter.config VALUES (true, 1);
COMMENT ON TABLE wfrouter.config IS
'The version of the cluster configuration PL/Proxy caches; every change of the shards or the map raises it.';

SELECT pg_catalog.pg_extension_config_dump('wfrouter.shards', '');
SELECT pg_catalog.pg_extension_config_dump('wfrouter.partitions', '');
SELECT pg_catalog.pg_extension_config_dump('wfrouter.config', '');

-- PL/Proxy reloads its cached cluster when the version goes up
CREATE FUNCTION wfrouter._bump_version()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    UPDATE wfrouter.config SET version = version OPERATOR(pg_catalog.+) 1;
    RETURN NULL;
END
$$;
CREATE TRIGGER shards_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON wfrouter.shards
    FOR EACH STATEMENT EXECUTE FUNCTION wfrouter._bump_version();
CREATE TRIGGER partitions_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON wfrouter.partitions
    FOR EACH STATEMENT EXECUTE FUNCTION wfrouter._bump_version();

CREATE FUNCTION wfrouter.configure(shards jsonb, partitions integer DEFAULT 64)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    names text[];
    n integer;
BEGIN
    IF shards IS NULL OR pg_catalog.jsonb_typeof(shards) OPERATOR(pg_catalog.<>) 'object'
       OR shards OPERATOR(pg_catalog.=) '{}'::jsonb THEN
        RAISE EXCEPTION 'shards must be a JSON object of shard names and connection strings'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example {"s1": "host=db1 dbname=wf", "s2": "host=db2 dbname=wf"}.';
    END IF;
    IF partitions IS NULL OR partitions OPERATOR(pg_catalog.<) 1 OR partitions OPERATOR(pg_catalog.>) 4096
       OR (partitions OPERATOR(pg_catalog.&) (partitions OPERATOR(pg_catalog.-) 1)) OPERATOR(pg_catalog.<>) 0 THEN
        RAISE EXCEPTION 'shard map has % partitions', partitions
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The number of partitions is a power of 2 between 1 and 4096.';
    END IF;
    names := ARRAY(SELECT k FROM pg_catalog.jsonb_object_keys(shards) k ORDER BY k COLLATE "C");
    n := pg_catalog.cardinality(names);
    IF n OPERATOR(pg_catalog.>) partitions THEN
        RAISE EXCEPTION '% shards are more than % partitions', n, partitions
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM wfrouter.partitions;
    DELETE FROM wfrouter.shards;
    INSERT INTO wfrouter.shards (shard, connstr)
        SELECT k, shards OPERATOR(pg_catalog.->>) k FROM pg_catalog.unnest(names) k;
    INSERT INTO wfrouter.partitions (partition, shard)
        SELECT p, names[(p OPERATOR(pg_catalog.%) n) OPERATOR(pg_catalog.+) 1]
        FROM pg_catalog.generate_series(0, partitions OPERATOR(pg_catalog.-) 1) p;
    RETURN n;
END
$$;
COMMENT ON FUNCTION wfrouter.configure(jsonb, integer) IS
'Sets the shards ({"name": "connection string", ...}) and a new map of partitions (a power of 2) that deals the partitions out in turn in name order; returns the number of shards. Only for a new deployment: it does not move runs.';

CREATE FUNCTION wfrouter.shard_map()
RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT pg_catalog.array_agg(p.shard ORDER BY p.partition) FROM wfrouter.partitions p
$$;
COMMENT ON FUNCTION wfrouter.shard_map() IS
'The partition map as wf.configure_shard(self, map) takes it on each shard: element i + 1 is the shard of partition i.';

CREATE FUNCTION wfrouter.shards()
RETURNS TABLE (shard text, connstr text, partitions integer[])
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT s.shard, s.connstr,
       ARRAY(SELECT p.partition FROM wfrouter.partitions p
             WHERE p.shard OPERATOR(pg_catalog.=) s.shard ORDER BY p.partition)
FROM wfrouter.shards s ORDER BY s.shard COLLATE "C"
$$;
COMMENT ON FUNCTION wfrouter.shards() IS
'The shard list workers connect to directly: each shard''s connection string and the partitions it owns.';

-- the tenant of the session user, by the rule of src/tenant.c
CREATE FUNCTION wfrouter.current_tenant()
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found text[];
BEGIN
    found := ARRAY(
        WITH RECURSIVE m(roleid) AS (
            SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) session_user
            UNION
            SELECT a.roleid FROM pg_catalog.pg_auth_members a
            JOIN m ON a.member OPERATOR(pg_catalog.=) m.roleid)
        SELECT pg_catalog.substr(r.rolname, 11) FROM pg_catalog.pg_roles r
        JOIN m ON r.oid OPERATOR(pg_catalog.=) m.roleid
        WHERE r.rolname OPERATOR(pg_catalog.~~) 'wf\_tenant\_%'
        ORDER BY 1 LIMIT 2);
    IF pg_catalog.cardinality(found) OPERATOR(pg_catalog.=) 1 THEN
        RETURN found[1];
    ELSIF pg_catalog.cardinality(found) OPERATOR(pg_catalog.=) 2 THEN
        RAISE EXCEPTION 'role "%" belongs to more than one wfengine tenant ("%", "%")',
            session_user, found[1], found[2]
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A login acts for one tenant: revoke all but one of its wf_tenant_* roles.';
    ELSIF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) session_user) THEN
        RETURN 'default';
    END IF;
    RAISE EXCEPTION 'role "%" belongs to no wfengine tenant', session_user
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'Make it a member of a role wf_tenant_<tenant> on the router, as on the shards.';
END
$$;
COMMENT ON FUNCTION wfrouter.current_tenant() IS
'The tenant of the session user: the one wf_tenant_<tenant> role it is a member of ("default" for a superuser of none), as on a shard.';

CREATE FUNCTION wfrouter.tenant_partition(tenant text)
RETURNS integer
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
SELECT pg_catalog.hashtext(tenant) OPERATOR(pg_catalog.&)
       ((SELECT pg_catalog.count(*) FROM wfrouter.partitions)::integer OPERATOR(pg_catalog.-) 1)
$$;
COMMENT ON FUNCTION wfrouter.tenant_partition(text) IS
'The partition of a tenant under the current map (wf.tenant_partition on a shard).';

CREATE FUNCTION wfrouter.tenant_shard(tenant text)
RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
SELECT p.shard FROM wfrouter.partitions p
WHERE p.partition OPERATOR(pg_catalog.=) wfrouter.tenant_partition(tenant)
$$;
COMMENT ON FUNCTION wfrouter.tenant_shard(text) IS 'The shard a tenant lives on.';

-- the hash PL/Proxy's RUN ON maps to a partition (& (partitions - 1))
CREATE FUNCTION wfrouter.route()
RETURNS integer
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT pg_catalog.hashtext(wfrouter.current_tenant())
$$;
COMMENT ON FUNCTION wfrouter.route() IS
'The routing hash of the caller''s tenant: PL/Proxy runs a call on partition route() & (partitions - 1).';

-- PL/Proxy's configuration API: cluster "wfengine" has one connection
-- string per partition (partitions of one shard share a connection),
-- cluster "wfengine_shards" one per shard (RUN ON ALL reaches each shard
-- once; modular mapping, as the number of shards need not be a power of 2).
-- PL/Proxy calls these as the caller of a proxy function, so the job roles
-- may execute them (and see the connection strings, as wfrouter.shards()
-- shows them); PUBLIC may not, nor use the schema (issue 29).
CREATE FUNCTION plproxy.get_cluster_version(cluster_name text)
RETURNS integer
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF cluster_name OPERATOR(pg_catalog.=) ANY (ARRAY['wfengine', 'wfengine_shards']) THEN
        RETURN (SELECT c.version FROM wfrouter.config c);
    END IF;
    RAISE EXCEPTION 'unknown PL/Proxy cluster "%"', cluster_name
        USING ERRCODE = 'undefined_object';
END
$$;

CREATE FUNCTION plproxy.get_cluster_partitions(cluster_name text)
RETURNS SETOF text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM wfrouter.partitions) THEN
        RAISE EXCEPTION 'the router has no shards'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Set them with wfrouter.configure(shards, partitions).';
    END IF;
    IF cluster_name OPERATOR(pg_catalog.=) 'wfengine' THEN
        RETURN QUERY SELECT s.connstr FROM wfrouter.partitions p
            JOIN wfrouter.shards s ON s.shard OPERATOR(pg_catalog.=) p.shard
            ORDER BY p.partition;
    ELSIF cluster_name OPERATOR(pg_catalog.=) 'wfengine_shards' THEN
        RETURN QUERY SELECT s.connstr FROM wfrouter.shards s
            WHERE EXISTS (SELECT 1 FROM wfrouter.partitions p WHERE p.shard OPERATOR(pg_catalog.=) s.shard)
            ORDER BY s.shard COLLATE "C";
    ELSE
        RAISE EXCEPTION 'unknown PL/Proxy cluster "%"', cluster_name
            USING ERRCODE = 'undefined_object';
    END IF;
END
$$;

CREATE FUNCTION plproxy.get_cluster_config(IN cluster_name text, OUT key text, OUT val text)
RETURNS SETOF record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- connect onward as the login that connected to the router, also
    -- after SET ROLE: the shard finds the tenant from it
    key := 'default_user';
    val := 'session_user';
    RETURN NEXT;
    IF cluster_name OPERATOR(pg_catalog.=) 'wfengine_shards' THEN
        key := 'modular_mapping';
        val := '1';
        RETURN NEXT;
    END IF;
END
$$;

-- the shard's name, for the merged views
CREATE FUNCTION wfrouter._shard_name()
RETURNS SETOF text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine_shards';
    RUN ON ALL;
    SELECT s.shard FROM wfshard.self s;
$$;

-- publish_definition: on every shard, so that a tenant's definitions are
-- in place wherever its partition is (each shard accepts it from any of
-- its tenants' logins)
CREATE FUNCTION wfrouter.publish_everywhere(name text, spec jsonb)
RETURNS SETOF integer
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine_shards';
    RUN ON ALL;
    TARGET wf.publish_definition;
$$;

COMMENT ON FUNCTION wfrouter.publish_everywhere(text, jsonb) IS
'wf.publish_definition on every shard: the version each shard gave the definition of the caller''s tenant.';

-- Not SECURITY DEFINER: PL/Proxy connects as the current user on the first
-- call of a cluster in a backend (before it has read default_user), so a
-- definer's proxy call would reach the shards as the definer
CREATE FUNCTION wf.publish_definition(name text, spec jsonb)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    versions integer[];
BEGIN
    versions := ARRAY(SELECT v FROM wfrouter.publish_everywhere(name, spec) v ORDER BY v);
    IF versions[1] OPERATOR(pg_catalog.<>) versions[pg_catalog.cardinality(versions)] THEN
        RAISE WARNING 'definition "%" has version % on some shards and % on others',
            name, versions[1], versions[pg_catalog.cardinality(versions)]
            USING HINT = 'A shard missed a publication: publish the definition on it directly.';
    END IF;
    RETURN versions[pg_catalog.cardinality(versions)];
END
$$;
COMMENT ON FUNCTION wf.publish_definition(text, jsonb) IS
'Publishes a definition of the caller''s tenant on every shard; returns its version (the highest, with a warning when the shards disagree).';

CREATE FUNCTION wf.current_tenant()
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT wfrouter.current_tenant() $$;
COMMENT ON FUNCTION wf.current_tenant() IS 'The caller''s tenant, as on a shard.';

-- cross-tenant operator views: every shard's rows (row-level security on
-- each shard shows a tenant's login its own tenant only; a superuser sees
-- all), with the shard they come from
CREATE FUNCTION wfrouter.queue_stats()
RETURNS TABLE (shard text, tenant_id text, queue text, ready bigint, leased bigint,
               oldest_ready_age_seconds double precision, claims_1m bigint,
               completions_1m bigint, failures_1m bigint, expired_leases bigint)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine_shards';
    RUN ON ALL;
    SELECT s.shard, q.tenant_id, q.queue, q.ready, q.leased, q.oldest_ready_age_seconds,
           q.claims_1m, q.completions_1m, q.failures_1m, q.expired_leases
    FROM wf.queue_stats q CROSS JOIN wfshard.self s;
$$;
COMMENT ON FUNCTION wfrouter.queue_stats() IS 'wf.queue_stats of every shard, with the shard.';

CREATE FUNCTION wfrouter.run_stats()
RETURNS TABLE (shard text, tenant_id text, definition_name text, definition_version integer,
               running bigint, paused bigint, undoing bigint, completed_5m bigint,
               failed_5m bigint, stopped_5m bigint, duration_p50_seconds double precision,
               duration_p95_seconds double precision, failure_rate_5m double precision,
               retries_5m bigint, retries_per_step_5m double precision)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine_shards';
    RUN ON ALL;
    SELECT s.shard, r.tenant_id, r.definition_name, r.definition_version, r.running, r.paused,
           r.undoing, r.completed_5m, r.failed_5m, r.stopped_5m, r.duration_p50_seconds,
           r.duration_p95_seconds, r.failure_rate_5m, r.retries_5m, r.retries_per_step_5m
    FROM wf.run_stats r CROSS JOIN wfshard.self s;
$$;
COMMENT ON FUNCTION wfrouter.run_stats() IS 'wf.run_stats of every shard, with the shard.';

-- merged: tenants never span shards, so the union is the whole picture
CREATE VIEW wf.queue_stats AS
    SELECT q.tenant_id, q.queue, q.ready, q.leased, q.oldest_ready_age_seconds,
           q.claims_1m, q.completions_1m, q.failures_1m, q.expired_leases, q.shard
    FROM wfrouter.queue_stats() q;
COMMENT ON VIEW wf.queue_stats IS 'wf.queue_stats of every shard, merged (the last column names the shard).';
CREATE VIEW wf.run_stats AS
    SELECT r.tenant_id, r.definition_name, r.definition_version, r.running, r.paused, r.undoing,
           r.completed_5m, r.failed_5m, r.stopped_5m, r.duration_p50_seconds,
           r.duration_p95_seconds, r.failure_rate_5m, r.retries_5m, r.retries_per_step_5m, r.shard
    FROM wfrouter.run_stats() r;
COMMENT ON VIEW wf.run_stats IS 'wf.run_stats of every shard, merged (the last column names the shard).';

-- The application API: the same names, arguments and results as on a
-- shard; each runs the same call on the shard of the caller's tenant.

CREATE FUNCTION wf.start_run(definition text, input jsonb DEFAULT '{}'::jsonb, idempotency_key text DEFAULT NULL::text, version integer DEFAULT NULL::integer, traceparent text DEFAULT NULL::text)
RETURNS uuid
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.run_status(run uuid)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.history(run uuid)
RETURNS TABLE(seq integer, type text, step text, attempt integer, payload jsonb, actor text, created_at timestamp with time zone, hash text)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.explain(run uuid)
RETURNS jsonb
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.verify_run(run uuid)
RETURNS boolean
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.verify_run(run uuid, anchor jsonb)
RETURNS boolean
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.definition_graph(definition text, version integer DEFAULT NULL::integer, format text DEFAULT 'mermaid'::text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.run_graph(run uuid, format text DEFAULT 'mermaid'::text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.signal(run uuid, name text, payload jsonb DEFAULT '{}'::jsonb, event_id text DEFAULT NULL::text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.send_event(correlation_key text, name text, payload jsonb DEFAULT '{}'::jsonb, event_id text DEFAULT NULL::text, keep interval DEFAULT '1 day'::interval)
RETURNS TABLE(run_id uuid, outcome text)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.decide(token text, decision text, approver text, comment text DEFAULT NULL::text, data jsonb DEFAULT NULL::jsonb)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.terminate_run(run uuid, reason text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.update_context(run uuid, patch jsonb, reason text)
RETURNS jsonb
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.pause_run(run uuid, reason text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.resume_run(run uuid, reason text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.retry_step(run uuid, reason text, run_timeout interval DEFAULT NULL::interval)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.skip_step(run uuid, output jsonb, reason text, step text DEFAULT NULL::text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.cancel_run(run uuid, reason text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.migrate_run(run uuid, to_version integer, reason text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.cancel_runs(reason text, filter jsonb DEFAULT '{}'::jsonb, max_runs integer DEFAULT 100, after uuid DEFAULT NULL::uuid)
RETURNS TABLE(run_id uuid, outcome text, detail text)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.retry_runs(reason text, filter jsonb DEFAULT '{}'::jsonb, max_runs integer DEFAULT 100, after uuid DEFAULT NULL::uuid)
RETURNS TABLE(run_id uuid, outcome text, detail text)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.resume_runs(reason text, filter jsonb DEFAULT '{}'::jsonb, max_runs integer DEFAULT 100, after uuid DEFAULT NULL::uuid)
RETURNS TABLE(run_id uuid, outcome text, detail text)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.revoke_approval_tokens(run uuid, step text, reason text)
RETURNS integer
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.reissue_approval_tokens(run uuid, step text, reason text)
RETURNS bigint
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.set_approvers(run uuid, step text, approvers text[], reason text)
RETURNS void
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

CREATE FUNCTION wf.set_legal_hold(run uuid, hold boolean, reason text)
RETURNS boolean
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
$$;

-- Moving a partition to another shard (docs/scale-out.md, "Moving a
-- partition"), for superusers: through dblink, as the calling superuser,
-- to the shards' connection strings.  The steps, each safe to repeat:
--   1. the source gives the partition away in its map: from its commit on
--      the source refuses the partition's tenants (the target does too, the
--      router still sends them to the source) and the source's engine
--      worker leaves their timers and deadlines alone;
--   2. wf.export_partition on the source waits for every older transaction
--      (calls that passed the check before) and returns the rows;
--   3. wf.import_partition on the target inserts them, makes the leases
--      held on the source stale, verifies every run and takes the
--      partition, in one transaction (skipped when the target has it: a
--      move run again after a failure);
--   4. wf.drop_partition on the source deletes the rows;
--   5. the router's map and every other shard's.
-- A failure before 3 commits gives the partition back to the source.
CREATE FUNCTION wfrouter._connstr(shard text)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT s.connstr OPERATOR(pg_catalog.||) ' user=' OPERATOR(pg_catalog.||)
       pg_catalog.quote_literal(CURRENT_USER::text)
FROM wfrouter.shards s WHERE s.shard OPERATOR(pg_catalog.=) _connstr.shard
$$;

-- one statement on a shard, in a transaction of its own; its one value as text
CREATE FUNCTION wfrouter._remote(shard text, sql text)
RETURNS text
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
SELECT x.v FROM public.dblink(wfrouter._connstr(shard), sql) AS x(v text)
$$;

CREATE FUNCTION wfrouter._remote_owner(shard text, p integer)
RETURNS text
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
SELECT wfrouter._remote(shard,
    pg_catalog.format('SELECT m.shard FROM wfshard.partitions m WHERE m.partition = %s', p))
$$;

CREATE FUNCTION wfrouter.move_partition(p integer, to_shard text, wait interval DEFAULT '30 seconds')
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    from_shard text;
    old_map text[];
    new_map text[];
    data text;
    moved integer;
    s text;
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION 'permission denied for function wfrouter.move_partition'
            USING ERRCODE = 'insufficient_privilege', HINT = 'Moving a partition is for superusers.';
    END IF;
    SELECT m.shard INTO from_shard FROM wfrouter.partitions m WHERE m.partition OPERATOR(pg_catalog.=) p;
    IF from_shard IS NULL THEN
        RAISE EXCEPTION 'partition % is not in the router''s map', p
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM wfrouter.shards x WHERE x.shard OPERATOR(pg_catalog.=) to_shard) THEN
        RAISE EXCEPTION 'shard "%" does not exist', to_shard
            USING ERRCODE = 'undefined_object',
                  HINT = 'Add it first: INSERT INTO wfrouter.shards VALUES (name, connstr).';
    END IF;
    IF from_shard OPERATOR(pg_catalog.=) to_shard THEN
        RAISE EXCEPTION 'partition % is on shard "%" already', p, to_shard
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    old_map := wfrouter.shard_map();
    new_map := ARRAY(SELECT CASE WHEN m.partition OPERATOR(pg_catalog.=) p THEN to_shard ELSE m.shard END
                     FROM wfrouter.partitions m ORDER BY m.partition);

    -- 1. the source refuses the partition from now on
    PERFORM wfrouter._remote(from_shard,
        pg_catalog.format('SELECT wf.configure_shard(%L, %L)::text', from_shard, new_map));

    -- 2. and 3., unless the target has the partition already
    IF wfrouter._remote_owner(to_shard, p) IS DISTINCT FROM to_shard THEN
        BEGIN
            data := wfrouter._remote(from_shard,
                pg_catalog.format('SELECT wf.export_partition(%s, %L)::text', p, wait));
            moved := wfrouter._remote(to_shard,
                pg_catalog.format('SELECT wf.import_partition(%s, %L::jsonb)', p, data))::integer;
        EXCEPTION WHEN OTHERS THEN
            -- the target did not take it: back to the source, which has every row
            IF wfrouter._remote_owner(to_shard, p) IS DISTINCT FROM to_shard THEN
                PERFORM wfrouter._remote(from_shard,
                    pg_catalog.format('SELECT wf.configure_shard(%L, %L)::text', from_shard, old_map));
            END IF;
            RAISE;
        END;
    END IF;

    -- 4. the source's rows go
    PERFORM wfrouter._remote(from_shard,
        pg_catalog.format('SELECT wf.drop_partition(%s)::text', p));

    -- 5. the router sends the tenants to the target; the other shards learn it
    UPDATE wfrouter.partitions SET shard = to_shard WHERE partition OPERATOR(pg_catalog.=) p;
    FOR s IN SELECT x.shard FROM wfrouter.shards x
             WHERE x.shard OPERATOR(pg_catalog.<>) ALL (ARRAY[from_shard, to_shard])
               AND EXISTS (SELECT 1 FROM wfrouter.partitions m WHERE m.shard OPERATOR(pg_catalog.=) x.shard)
             ORDER BY x.shard LOOP
        PERFORM wfrouter._remote(s,
            pg_catalog.format('SELECT wf.configure_shard(%L, %L)::text', s, new_map));
    END LOOP;
    RETURN COALESCE(moved, 0);
END
$$;
COMMENT ON FUNCTION wfrouter.move_partition(integer, text, interval) IS
'For superusers: moves partition p''s tenants, with all their runs, to shard to_shard (each run verified there), and gives it the partition on the router and every shard; returns the number of runs moved. Safe to run again after a failure.';

-- privileges: as on a shard (docs/tenancy.md); the shard checks them
-- again for the login the call arrives as.  docs/scale-out.md lists every
-- role's EXECUTE set here, which test/t/120_shards.pl compares with the
-- catalog.  PUBLIC may execute nothing of wf, wfrouter and plproxy, nor
-- use schema plproxy: a login of no job role cannot read the shards'
-- connection strings.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA wf FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA wfrouter FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA plproxy FROM PUBLIC;
REVOKE ALL ON SCHEMA plproxy FROM PUBLIC;
GRANT USAGE ON SCHEMA wf, wfrouter, plproxy
    TO wfengine_app, wfengine_worker, wfengine_approver, wfengine_operator, wfengine_admin;
GRANT EXECUTE ON FUNCTION wf.current_tenant(), wfrouter.current_tenant(), wfrouter.route(),
    wfrouter.tenant_partition(text), wfrouter.tenant_shard(text), wfrouter.shards(),
    wfrouter.shard_map(), wfrouter.queue_stats(), wfrouter.run_stats(),
    plproxy.get_cluster_version(text), plproxy.get_cluster_partitions(text),
    plproxy.get_cluster_config(text)
    TO wfengine_app, wfengine_worker, wfengine_approver, wfengine_operator, wfengine_admin;
GRANT SELECT ON wf.queue_stats, wf.run_stats
    TO wfengine_app, wfengine_worker, wfengine_approver, wfengine_operator, wfengine_admin;
GRANT EXECUTE ON FUNCTION wf.publish_definition(text, jsonb), wfrouter.publish_everywhere(text, jsonb)
    TO wfengine_admin;
GRANT EXECUTE ON FUNCTION
    wf.start_run(definition text, input jsonb, idempotency_key text, version integer, traceparent text),
    wf.run_status(run uuid),
    wf.history(run uuid),
    wf.explain(run uuid),
    wf.verify_run(run uuid),
    wf.verify_run(run uuid, anchor jsonb),
    wf.definition_graph(definition text, version integer, format text),
    wf.run_graph(run uuid, format text),
    wf.signal(run uuid, name text, payload jsonb, event_id text),
    wf.send_event(correlation_key text, name text, payload jsonb, event_id text, keep interval)
    TO wfengine_app;
GRANT EXECUTE ON FUNCTION
    wf.decide(token text, decision text, approver text, comment text, data jsonb)
    TO wfengine_approver;
GRANT EXECUTE ON FUNCTION
    wf.terminate_run(run uuid, reason text),
    wf.update_context(run uuid, patch jsonb, reason text),
    wf.pause_run(run uuid, reason text),
    wf.resume_run(run uuid, reason text),
    wf.retry_step(run uuid, reason text, run_timeout interval),
    wf.skip_step(run uuid, output jsonb, reason text, step text),
    wf.cancel_run(run uuid, reason text),
    wf.migrate_run(run uuid, to_version integer, reason text),
    wf.cancel_runs(reason text, filter jsonb, max_runs integer, after uuid),
    wf.retry_runs(reason text, filter jsonb, max_runs integer, after uuid),
    wf.resume_runs(reason text, filter jsonb, max_runs integer, after uuid),
    wf.revoke_approval_tokens(run uuid, step text, reason text),
    wf.reissue_approval_tokens(run uuid, step text, reason text),
    wf.set_approvers(run uuid, step text, approvers text[], reason text),
    wf.set_legal_hold(run uuid, hold boolean, reason text)
    TO wfengine_operator;
