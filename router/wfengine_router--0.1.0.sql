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
    connstr text NOT NULL,
    id_block integer NOT NULL UNIQUE CHECK (id_block OPERATOR(pg_catalog.>=) 0)
);
COMMENT ON TABLE wfrouter.shards IS
'The shards: a name, a libpq connection string without user (PL/Proxy adds the caller''s login) and without password (use .pgpass, a pooler or certificates), and the block the shard draws its ids from (never two shards alike, never reused).';

CREATE TABLE wfrouter.partitions (
    partition integer PRIMARY KEY CHECK (partition OPERATOR(pg_catalog.>=) 0),
    shard text NOT NULL REFERENCES wfrouter.shards
);
COMMENT ON TABLE wfrouter.partitions IS
'The partition map: the shard of each hash partition of tenants; every shard holds the same map (wfshard.partitions).';

CREATE TABLE wfrouter.config (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    version integer NOT NULL,
    map_version bigint NOT NULL DEFAULT 0
);
INSERT INTO wfrouter.config VALUES (true, 1, 0);
COMMENT ON TABLE wfrouter.config IS
'version: the version of the cluster configuration PL/Proxy caches (every change of the shards or the map raises it); map_version: the version of the partition map, which every shard holds too (wfshard.self) and which only goes up.';

-- the moves of partitions, past and under way (wfrouter.move_partition)
CREATE TABLE wfrouter.moves (
    move_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    partition integer NOT NULL,
    from_shard text NOT NULL,
    to_shard text NOT NULL,
    phase text NOT NULL CHECK (phase OPERATOR(pg_catalog.=) ANY (ARRAY['copying', 'catching up', 'cutting over',
                                                                   'cleaning up', 'done', 'failed', 'cancelled'])),
    tables_total integer,
    tables_copied integer,
    rows_copied bigint,
    lag_bytes bigint,
    runs integer,
    dark_ms double precision,
    note text,
    started timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    updated timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    finished timestamptz
);
CREATE UNIQUE INDEX moves_one_per_partition ON wfrouter.moves (partition) WHERE finished IS NULL;
COMMENT ON TABLE wfrouter.moves IS
'Every move of a partition: its phase (copying, catching up, cutting over, cleaning up; done, failed or cancelled), progress (tables and rows copied, replication lag), the runs it moved and how long the partition was refused at the cut-over (dark_ms). Written as the move goes, visible at once.';
SELECT pg_catalog.pg_extension_config_dump('wfrouter.moves', '');

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

-- superusers only
CREATE FUNCTION wfrouter._superuser(what text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
        RAISE EXCEPTION 'permission denied for function wfrouter.%', what
            USING ERRCODE = 'insufficient_privilege', HINT = 'Configuring shards and moving partitions is for superusers.';
    END IF;
END
$$;

-- a shard's connection string, as the current user (a superuser: dblink);
-- the session's search_path is pinned, since the statements the router
-- sends there run as a superuser and are not all schema-qualified
CREATE FUNCTION wfrouter._connstr(shard text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c text := (SELECT s.connstr FROM wfrouter.shards s WHERE s.shard OPERATOR(pg_catalog.=) _connstr.shard);
BEGIN
    IF c IS NULL THEN
        RAISE EXCEPTION 'shard "%" does not exist', shard
            USING ERRCODE = 'undefined_object',
                  HINT = 'Add it with wfrouter.add_shard(name, connstr).';
    END IF;
    RETURN c OPERATOR(pg_catalog.||) ' user=' OPERATOR(pg_catalog.||) pg_catalog.quote_literal(CURRENT_USER::text)
        OPERATOR(pg_catalog.||) ' options=''-c search_path=pg_catalog,pg_temp''';
END
$$;

-- one statement on a shard, in a transaction of its own; its one value as text
CREATE FUNCTION wfrouter._remote(shard text, sql text)
RETURNS text
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
SELECT x.v FROM public.dblink(wfrouter._connstr(shard), sql) AS x(v text)
$$;

-- a command that cannot run in a transaction block (CREATE SUBSCRIPTION)
CREATE FUNCTION wfrouter._remote_exec(shard text, sql text)
RETURNS text
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
SELECT public.dblink_exec(wfrouter._connstr(shard), sql)
$$;

-- the map as an array (element i + 1: partition i)
CREATE FUNCTION wfrouter._map()
RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT pg_catalog.array_agg(p.shard ORDER BY p.partition) FROM wfrouter.partitions p
$$;

-- the router's map and version to a shard (its name and id block with it)
CREATE FUNCTION wfrouter._push_map(shard text)
RETURNS integer
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
SELECT wfrouter._remote(shard, pg_catalog.format('SELECT wf.configure_shard(%L, %L, %s, %s)::text', shard,
    wfrouter._map(), (SELECT s.id_block FROM wfrouter.shards s WHERE s.shard OPERATOR(pg_catalog.=) _push_map.shard),
    (SELECT c.map_version FROM wfrouter.config c)))::integer
$$;


CREATE FUNCTION wfrouter.configure(shards jsonb, partitions integer DEFAULT 64, configure_shards boolean DEFAULT true)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    names text[];
    n integer;
    one text;
BEGIN
    PERFORM wfrouter._superuser('configure');
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
    -- id blocks 1, 2, ... in name order (block 0: ids of an unsharded install)
    INSERT INTO wfrouter.shards (shard, connstr, id_block)
        SELECT k, shards OPERATOR(pg_catalog.->>) k, i::integer
        FROM pg_catalog.unnest(names) WITH ORDINALITY AS u(k, i);
    INSERT INTO wfrouter.partitions (partition, shard)
        SELECT p, names[(p OPERATOR(pg_catalog.%) n) OPERATOR(pg_catalog.+) 1]
        FROM pg_catalog.generate_series(0, partitions OPERATOR(pg_catalog.-) 1) p;
    UPDATE wfrouter.config SET map_version = map_version OPERATOR(pg_catalog.+) 1;
    -- every shard learns its name, id block and the map
    IF configure_shards THEN
        FOR one IN SELECT x.shard FROM wfrouter.shards x ORDER BY x.shard COLLATE "C" LOOP
            PERFORM wfrouter._push_map(one);
        END LOOP;
    END IF;
    RETURN n;
END
$$;
COMMENT ON FUNCTION wfrouter.configure(jsonb, integer, boolean) IS
'For superusers: sets the shards ({"name": "connection string", ...}), gives each its own id block and a new map of partitions (a power of 2) that deals the partitions out in turn in name order, and (configure_shards) configures every shard with its name, block and the map (wf.configure_shard, through dblink); returns the number of shards. Only for a new deployment: it does not move runs.';

CREATE FUNCTION wfrouter.shard_map()
RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER
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
LANGUAGE sql STABLE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT pg_catalog.hashtext(tenant) OPERATOR(pg_catalog.&)
       ((SELECT pg_catalog.count(*) FROM wfrouter.partitions)::integer OPERATOR(pg_catalog.-) 1)
$$;
COMMENT ON FUNCTION wfrouter.tenant_partition(text) IS
'The partition of a tenant under the current map (wf.tenant_partition on a shard).';

CREATE FUNCTION wfrouter.tenant_shard(tenant text)
RETURNS text
LANGUAGE sql STABLE STRICT SECURITY DEFINER
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
        -- every shard, also one that owns no partition yet (publications
        -- reach a shard before partitions move to it)
        RETURN QUERY SELECT s.connstr FROM wfrouter.shards s ORDER BY s.shard COLLATE "C";
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

-- The map the shards hold wins: a shard refuses a tenant it does not own
-- with 55W01, naming the owner in its map (version N); the router learns
-- that shard's map when it is newer than its own and tries the call once
-- more (wfrouter._retry).  So any number of routers serve one cluster, and
-- a move made through one is seen by the others on their next call of a
-- moved tenant.  SECURITY DEFINER: it reads the shard as the extension's
-- owner (dblink) and writes the router's tables; it applies only a map of
-- a higher version, read from a shard of the router's own list.
CREATE FUNCTION wfrouter._learn_map(shard text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v bigint;
    m text[];
BEGIN
    IF shard IS NULL THEN
        RETURN false;
    END IF;
    SELECT x.v, x.m::text[] INTO v, m
    FROM public.dblink(wfrouter._connstr(shard),
        'SELECT s.map_version, (SELECT pg_catalog.array_agg(p.shard ORDER BY p.partition) FROM wfshard.partitions p)::text FROM wfshard.self s')
        AS x(v bigint, m text);
    RETURN wfrouter._apply_map(m, v);
END
$$;

-- a map of a higher version than the router's replaces its map (false: not
-- newer, or another session is applying one)
CREATE FUNCTION wfrouter._apply_map(m text[], v bigint)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    unknown text;
BEGIN
    IF v IS NULL OR m IS NULL OR v OPERATOR(pg_catalog.<=) (SELECT c.map_version FROM wfrouter.config c)
       OR pg_catalog.cardinality(m) OPERATOR(pg_catalog.<>) (SELECT pg_catalog.count(*) FROM wfrouter.partitions) THEN
        RETURN false;
    END IF;
    SELECT pg_catalog.string_agg(DISTINCT x, ', ') INTO unknown FROM pg_catalog.unnest(m) x
    WHERE NOT EXISTS (SELECT 1 FROM wfrouter.shards s WHERE s.shard OPERATOR(pg_catalog.=) x);
    IF unknown IS NOT NULL THEN
        RAISE WARNING 'the shard map of version % names shards this router does not know: %', v, unknown
            USING HINT = 'Add them on this router too: wfrouter.add_shard(name, connstr).';
        RETURN false;
    END IF;
    BEGIN
        PERFORM pg_catalog.set_config('lock_timeout', '100', true);
        UPDATE wfrouter.config SET map_version = v WHERE map_version OPERATOR(pg_catalog.<) v;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
        UPDATE wfrouter.partitions p SET shard = m[p.partition OPERATOR(pg_catalog.+) 1]
        WHERE p.shard OPERATOR(pg_catalog.<>) m[p.partition OPERATOR(pg_catalog.+) 1];
    EXCEPTION WHEN lock_not_available THEN
        RETURN false;
    END;
    RETURN true;
END
$$;

-- what a routed call does with an answer its shard could not give:
-- 55W01 (the shard does not own the tenant): learn the shard's map and try
-- once more, else a retryable 40001; PL/Proxy's XX000 of a shard it cannot
-- reach: 08006 naming the shard; any other XX000 as it came
CREATE FUNCTION wfrouter._retry(tries integer, st text, msg text, det text, hnt text)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tenant text := wfrouter.current_tenant();
    shard text := wfrouter.tenant_shard(tenant);
BEGIN
    IF st OPERATOR(pg_catalog.=) '55W01' THEN
        IF tries OPERATOR(pg_catalog.=) 0 AND wfrouter._learn_map(shard) THEN
            RETURN tries OPERATOR(pg_catalog.+) 1;
        END IF;
        RAISE EXCEPTION 'tenant "%" is moving to another shard', tenant
            USING ERRCODE = 'serialization_failure',
                  DETAIL = msg OPERATOR(pg_catalog.||) COALESCE(' ' OPERATOR(pg_catalog.||) det, ''),
                  HINT = 'Retry the call: a partition is refused only during the cut-over of its move, well under a second.';
    END IF;
    IF msg OPERATOR(pg_catalog.~*) '(could not connect|connection to server|PQconnectPoll|server closed the connection|terminating connection|Connection refused|No such file or directory|timeout expired|could not send|could not receive|connection not open|SSL SYSCALL)' THEN
        RAISE EXCEPTION 'shard "%" of tenant "%" cannot be reached', shard, tenant
            USING ERRCODE = 'connection_failure',
                  DETAIL = msg,
                  HINT = 'Retry the call: the shard may be failing over; the router connects again on the next call.';
    END IF;
    IF det IS NOT NULL AND det OPERATOR(pg_catalog.<>) '' AND hnt IS NOT NULL AND hnt OPERATOR(pg_catalog.<>) '' THEN
        RAISE EXCEPTION USING MESSAGE = msg, ERRCODE = st, DETAIL = det, HINT = hnt;
    ELSIF det IS NOT NULL AND det OPERATOR(pg_catalog.<>) '' THEN
        RAISE EXCEPTION USING MESSAGE = msg, ERRCODE = st, DETAIL = det;
    ELSIF hnt IS NOT NULL AND hnt OPERATOR(pg_catalog.<>) '' THEN
        RAISE EXCEPTION USING MESSAGE = msg, ERRCODE = st, HINT = hnt;
    END IF;
    RAISE EXCEPTION USING MESSAGE = msg, ERRCODE = st;
END
$$;

-- Moving a partition to another shard (docs/scale-out.md, "Moving a
-- partition"), for superusers, on PostgreSQL's logical replication: through
-- dblink, as the calling superuser, to the shards' connection strings.
--   1. copy: the source publishes the partition's rows (row filters), the
--      target subscribes (initial copy, then every change streams) while
--      the partition stays live on the source; every copied run verifies;
--   2. cut-over: the source takes the partition lock (the calls in flight
--      end, new ones are refused with 40001) and gives the partition away
--      in its map; the target reaches the source's WAL position, stops the
--      subscription, makes the leases held on the source stale, verifies
--      the runs changed since step 1 and takes the partition;
--   3. the router's map; the subscription, the publication and the
--      source's rows go; the other shards learn the map.
-- Progress is in wfrouter.moves, written through a connection of its own
-- so that it is seen while the move runs.  Run again after any failure or
-- crash, it goes on from where the shards are; wfrouter.cancel_move undoes
-- a move that has not cut over.

-- a statement on this router database in a transaction of its own
CREATE FUNCTION wfrouter._loopback(sql text)
RETURNS text
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
SELECT x.v FROM public.dblink(
    pg_catalog.format('dbname=%s port=%s host=%s user=%s options=''-c search_path=pg_catalog,pg_temp''',
        pg_catalog.quote_literal(pg_catalog.current_database()),
        pg_catalog.current_setting('port'),
        COALESCE(NULLIF(pg_catalog.split_part(pg_catalog.current_setting('unix_socket_directories'), ',', 1), ''), 'localhost'),
        pg_catalog.quote_literal(CURRENT_USER::text)),
    sql) AS x(v text)
$$;

CREATE FUNCTION wfrouter._note(id bigint, phase text, fields jsonb DEFAULT '{}')
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
SELECT wfrouter._loopback(pg_catalog.format(
    'UPDATE wfrouter.moves m SET phase = %L, updated = pg_catalog.clock_timestamp(), '
    'tables_total = COALESCE((%L::jsonb OPERATOR(pg_catalog.->>) ''tables_total'')::integer, m.tables_total), '
    'tables_copied = COALESCE((%L::jsonb OPERATOR(pg_catalog.->>) ''tables_copied'')::integer, m.tables_copied), '
    'rows_copied = COALESCE((%L::jsonb OPERATOR(pg_catalog.->>) ''rows_copied'')::bigint, m.rows_copied), '
    'lag_bytes = COALESCE((%L::jsonb OPERATOR(pg_catalog.->>) ''lag_bytes'')::bigint, m.lag_bytes), '
    'runs = COALESCE((%L::jsonb OPERATOR(pg_catalog.->>) ''runs'')::integer, m.runs), '
    'dark_ms = COALESCE((%L::jsonb OPERATOR(pg_catalog.->>) ''dark_ms'')::double precision, m.dark_ms), '
    'note = CASE WHEN %L::jsonb OPERATOR(pg_catalog.?) ''note'' THEN %L::jsonb OPERATOR(pg_catalog.->>) ''note'' ELSE m.note END, '
    'finished = CASE WHEN %L = ANY (ARRAY[''done'', ''failed'', ''cancelled'']) THEN pg_catalog.clock_timestamp() END '
    'WHERE m.move_id = %s RETURNING ''ok''',
    phase, fields, fields, fields, fields, fields, fields, fields, fields, phase, id))
$$;

CREATE FUNCTION wfrouter._remote_owner(shard text, p integer)
RETURNS text
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
SELECT wfrouter._remote(shard,
    pg_catalog.format('SELECT m.shard FROM wfshard.partitions m WHERE m.partition = %s', p))
$$;

-- bytes of the source's WAL the target has still to confirm
CREATE FUNCTION wfrouter._lag(shard text, slot text)
RETURNS bigint
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
SELECT wfrouter._remote(shard, pg_catalog.format(
    'SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint '
    'FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = %L', slot))::bigint
$$;

-- the map with partition p given to shard
CREATE FUNCTION wfrouter._map_with(p integer, shard text)
RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
-- ($2: the name shard would be the column m.shard here)
SELECT pg_catalog.array_agg(CASE WHEN m.partition OPERATOR(pg_catalog.=) $1 THEN $2 ELSE m.shard END ORDER BY m.partition)
FROM wfrouter.partitions m
$$;

-- a cut-over that failed: the source takes partition p back (it has every
-- row) under a map version above the one it gave the partition away with
CREATE FUNCTION wfrouter._give_back(from_shard text, p integer, gave_version bigint)
RETURNS void
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
SELECT wfrouter._remote(from_shard, pg_catalog.format('SELECT wf.configure_shard(%L, %L, NULL, %s)',
    from_shard, wfrouter._map_with(p, from_shard), gave_version OPERATOR(pg_catalog.+) 1))
$$;

CREATE FUNCTION wfrouter.move_partition(p integer, to_shard text, wait interval DEFAULT '30 seconds')
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    from_shard text;
    mv record;
    id bigint;
    sub text := 'wf_move_' OPERATOR(pg_catalog.||) p;
    st jsonb;
    prog record;
    verified timestamptz;
    t0 timestamptz;
    deadline timestamptz;
    lag bigint;
    version bigint;
    runs integer;
    s text;
    reached text;
BEGIN
    PERFORM wfrouter._superuser('move_partition');
    IF NOT EXISTS (SELECT 1 FROM wfrouter.partitions m WHERE m.partition OPERATOR(pg_catalog.=) p) THEN
        RAISE EXCEPTION 'partition % is not in the router''s map', p
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM wfrouter.shards x WHERE x.shard OPERATOR(pg_catalog.=) to_shard) THEN
        RAISE EXCEPTION 'shard "%" does not exist', to_shard
            USING ERRCODE = 'undefined_object',
                  HINT = 'Add it first: wfrouter.add_shard(name, connstr).';
    END IF;
    SELECT * INTO mv FROM wfrouter.moves m WHERE m.finished IS NULL ORDER BY m.move_id LIMIT 1;
    IF FOUND AND mv.partition OPERATOR(pg_catalog.<>) p THEN
        RAISE EXCEPTION 'partition % is being moved from shard "%" to shard "%"', mv.partition, mv.from_shard, mv.to_shard
            USING ERRCODE = 'object_in_use',
                  HINT = 'One move at a time: finish it with wfrouter.move_partition, or cancel it with wfrouter.cancel_move.';
    ELSIF FOUND THEN
        IF mv.to_shard OPERATOR(pg_catalog.<>) to_shard THEN
            RAISE EXCEPTION 'partition % is being moved to shard "%"', p, mv.to_shard
                USING ERRCODE = 'object_in_use',
                      HINT = 'Finish that move with wfrouter.move_partition, or cancel it with wfrouter.cancel_move.';
        END IF;
        from_shard := mv.from_shard;
        id := mv.move_id;
    ELSE
        from_shard := (SELECT m.shard FROM wfrouter.partitions m WHERE m.partition OPERATOR(pg_catalog.=) p);
        IF from_shard OPERATOR(pg_catalog.=) to_shard THEN
            RAISE EXCEPTION 'partition % is on shard "%" already', p, to_shard
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        id := wfrouter._loopback(pg_catalog.format(
            'INSERT INTO wfrouter.moves (partition, from_shard, to_shard, phase) VALUES (%s, %L, %L, ''copying'') RETURNING move_id',
            p, from_shard, to_shard))::bigint;
    END IF;

    IF wfrouter._remote_owner(to_shard, p) IS DISTINCT FROM to_shard THEN
        IF wfrouter._remote_owner(from_shard, p) OPERATOR(pg_catalog.=) from_shard THEN
            -- 1. the copy, while the partition stays live on the source
            PERFORM wfrouter._remote(from_shard, pg_catalog.format('SELECT wf.move_out_begin(%s)', p));
            IF wfrouter._remote(to_shard, pg_catalog.format(
                   'SELECT pg_catalog.count(*) FROM pg_catalog.pg_subscription WHERE subname = %L', sub)) OPERATOR(pg_catalog.=) '0' THEN
                PERFORM wfrouter._remote(to_shard, pg_catalog.format('SELECT wf.move_in_begin(%s, %L::jsonb)', p,
                    wfrouter._remote(from_shard, pg_catalog.format('SELECT wf.partition_definitions(%s)', p))));
                PERFORM wfrouter._remote_exec(to_shard, pg_catalog.format(
                    'CREATE SUBSCRIPTION %I CONNECTION %L PUBLICATION %I WITH (copy_data = true, synchronous_commit = on)',
                    sub, (SELECT x.connstr FROM wfrouter.shards x WHERE x.shard OPERATOR(pg_catalog.=) from_shard)
                         OPERATOR(pg_catalog.||) ' user=' OPERATOR(pg_catalog.||) pg_catalog.quote_literal(CURRENT_USER::text), sub));
            END IF;
            LOOP
                SELECT * INTO prog FROM public.dblink(wfrouter._connstr(to_shard),
                    pg_catalog.format('SELECT * FROM wf.move_progress(%s)', p))
                    AS x(tables_total integer, tables_copied integer, rows_copying bigint);
                lag := wfrouter._lag(from_shard, sub);
                PERFORM wfrouter._note(id, 'copying', pg_catalog.jsonb_build_object('tables_total', prog.tables_total,
                    'tables_copied', prog.tables_copied, 'rows_copied', prog.rows_copying, 'lag_bytes', lag));
                EXIT WHEN prog.tables_total OPERATOR(pg_catalog.>) 0 AND prog.tables_copied OPERATOR(pg_catalog.=) prog.tables_total;
                PERFORM pg_catalog.pg_sleep(0.1);
            END LOOP;
            -- statistics of what the copy wrote, for the cut-over's statements
            PERFORM wfrouter._remote_exec(to_shard, 'ANALYZE wf.runs, wf.tasks, wfshard.moved_runs');
            -- every copied run verifies, online; then the runs changed
            -- meanwhile, so that the cut-over verifies few; then the
            -- target comes within 64 kB of the source, so that the
            -- cut-over waits for little
            PERFORM wfrouter._note(id, 'catching up', pg_catalog.jsonb_build_object('lag_bytes', lag));
            verified := wfrouter._remote(to_shard, pg_catalog.format('SELECT wf.verify_partition(%s)', p))::timestamptz;
            verified := wfrouter._remote(to_shard, pg_catalog.format('SELECT wf.verify_partition(%s, %L)', p, verified))::timestamptz;
            -- the target reaches the source's WAL position of now, again
            -- until that takes under 100 ms (a source that writes steadily
            -- never shows a small lag: the position moves on meanwhile)
            deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) wait;
            FOR round IN 1..5 LOOP
                reached := wfrouter._remote(from_shard, 'SELECT pg_catalog.pg_current_wal_lsn()::text');
                t0 := pg_catalog.clock_timestamp();
                LOOP
                    EXIT WHEN wfrouter._remote(from_shard, pg_catalog.format(
                        'SELECT COALESCE(pg_catalog.bool_or(s.confirmed_flush_lsn >= %L::pg_lsn), false) FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = %L',
                        reached, sub))::boolean
                        OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>) deadline;
                    PERFORM pg_catalog.pg_sleep(0.01);
                END LOOP;
                PERFORM wfrouter._note(id, 'catching up', pg_catalog.jsonb_build_object('lag_bytes', wfrouter._lag(from_shard, sub)));
                EXIT WHEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<) (t0 OPERATOR(pg_catalog.+) interval '100 milliseconds')
                       OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>) deadline;
            END LOOP;
        END IF;
        -- 2. the cut-over: the partition is refused from the source's lock
        -- to the target's commit
        deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) wait;
        LOOP
            PERFORM wfrouter._note(id, 'cutting over');
            t0 := pg_catalog.clock_timestamp();
            st := wfrouter._remote(from_shard, pg_catalog.format('SELECT wf.move_out_cutover(%s, %L, 500)', p, to_shard))::jsonb;
            EXIT WHEN st OPERATOR(pg_catalog.?) 'lsn';
            PERFORM wfrouter._note(id, 'cutting over', pg_catalog.jsonb_build_object('note',
                'waiting for ' OPERATOR(pg_catalog.||) (st OPERATOR(pg_catalog.->>) 'waiting_for')));
            IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>) deadline THEN
                RAISE EXCEPTION 'cannot cut partition % over to shard "%": transactions of its tenants stay open on shard "%"',
                    p, to_shard, from_shard
                    USING ERRCODE = 'lock_not_available',
                          DETAIL = 'Waiting for ' OPERATOR(pg_catalog.||) (st OPERATOR(pg_catalog.->>) 'waiting_for') OPERATOR(pg_catalog.||) '.',
                          HINT = 'The partition stays live on the source and keeps streaming to the target: end those transactions and run wfrouter.move_partition again, or wfrouter.cancel_move.';
            END IF;
            -- not refused between tries
            PERFORM pg_catalog.pg_sleep(0.5);
        END LOOP;
        IF verified IS NULL THEN
            verified := '-infinity';
        END IF;
        -- the target reaches the source's WAL position
        LOOP
            EXIT WHEN wfrouter._remote(from_shard, pg_catalog.format(
                'SELECT COALESCE(pg_catalog.bool_or(s.confirmed_flush_lsn >= %L::pg_lsn), false) FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = %L',
                st OPERATOR(pg_catalog.->>) 'lsn', sub))::boolean;
            IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>) (t0 OPERATOR(pg_catalog.+) interval '10 seconds') THEN
                PERFORM wfrouter._give_back(from_shard, p, (st OPERATOR(pg_catalog.->>) 'map_version')::bigint);
                PERFORM wfrouter._note(id, 'catching up', pg_catalog.jsonb_build_object('note', 'the target did not catch up in 10 s'));
                RAISE EXCEPTION 'cannot cut partition % over to shard "%": it did not reach the source''s WAL position % in 10 s', p, to_shard, st OPERATOR(pg_catalog.->>) 'lsn'
                    USING ERRCODE = 'object_not_in_prerequisite_state',
                          HINT = 'The partition is live on the source again; look at the subscription on the target (pg_stat_subscription) and move again.';
            END IF;
            PERFORM pg_catalog.pg_sleep(0.002);
        END LOOP;
        BEGIN
            PERFORM wfrouter._remote(to_shard, pg_catalog.format('SELECT wf.move_in_cutover(%s, %L::jsonb, %L)', p, st, verified));
        EXCEPTION WHEN OTHERS THEN
            -- the source takes it back: it has every row
            IF wfrouter._remote_owner(to_shard, p) IS DISTINCT FROM to_shard THEN
                PERFORM wfrouter._give_back(from_shard, p, (st OPERATOR(pg_catalog.->>) 'map_version')::bigint);
            END IF;
            PERFORM wfrouter._note(id, 'catching up', pg_catalog.jsonb_build_object('note', 'cut-over failed: ' OPERATOR(pg_catalog.||) SQLERRM));
            RAISE;
        END;
        PERFORM wfrouter._note(id, 'cleaning up', pg_catalog.jsonb_build_object('dark_ms',
            EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) t0) OPERATOR(pg_catalog.*) 1000));
    END IF;

    -- 3. the router's map, at once for every session; then what is left
    version := wfrouter._remote(to_shard, 'SELECT s.map_version FROM wfshard.self s')::bigint;
    PERFORM wfrouter._loopback(pg_catalog.format('SELECT wfrouter._apply_map(%L, %s)::text', wfrouter._map_with(p, to_shard), version));
    PERFORM wfrouter._note(id, 'cleaning up');
    PERFORM wfrouter._remote_exec(to_shard, pg_catalog.format('DROP SUBSCRIPTION IF EXISTS %I', sub));
    PERFORM wfrouter._remote_exec(from_shard, pg_catalog.format('DROP PUBLICATION IF EXISTS %I', sub));
    PERFORM wfrouter._remote(from_shard, pg_catalog.format('SELECT wf.drop_partition(%s)::text', p));
    runs := wfrouter._remote(to_shard, pg_catalog.format('SELECT pg_catalog.count(*) FROM wf.runs r '
        'WHERE pg_catalog.hashtext(r.tenant_id) & %s = %s', pg_catalog.cardinality(wfrouter._map()) OPERATOR(pg_catalog.-) 1, p))::integer;
    -- the other shards learn the map (they refuse the partition either way)
    FOR s IN SELECT x.shard FROM wfrouter.shards x
             WHERE x.shard OPERATOR(pg_catalog.<>) ALL (ARRAY[from_shard, to_shard]) ORDER BY x.shard LOOP
        BEGIN
            PERFORM wfrouter._remote(s, pg_catalog.format('SELECT wf.configure_shard(%L, %L, NULL, %s)',
                s, wfrouter._map_with(p, to_shard), version));
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'shard "%" did not take map version %: %', s, version, SQLERRM;
        END;
    END LOOP;
    PERFORM wfrouter._note(id, 'done', pg_catalog.jsonb_build_object('runs', runs));
    RETURN runs;
END
$$;
COMMENT ON FUNCTION wfrouter.move_partition(integer, text, interval) IS
'For superusers: moves partition p''s tenants, with all their runs, to shard to_shard on logical replication (the partition stays live while it is copied; it is refused only during the cut-over), and gives it the partition on the router and every shard; returns the number of runs moved. wait bounds the catch-up and how long the cut-over waits for the tenants'' open transactions. Progress in wfrouter.moves; run again after any failure.';

CREATE FUNCTION wfrouter.cancel_move(p integer)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    mv record;
    sub text := 'wf_move_' OPERATOR(pg_catalog.||) p;
BEGIN
    PERFORM wfrouter._superuser('cancel_move');
    SELECT * INTO mv FROM wfrouter.moves m WHERE m.partition OPERATOR(pg_catalog.=) p AND m.finished IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no move of partition % is under way', p
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF wfrouter._remote_owner(mv.to_shard, p) OPERATOR(pg_catalog.=) mv.to_shard THEN
        RAISE EXCEPTION 'partition % has cut over to shard "%" already', p, mv.to_shard
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Finish the move with wfrouter.move_partition, then move the partition back.';
    END IF;
    IF wfrouter._remote_owner(mv.from_shard, p) OPERATOR(pg_catalog.<>) mv.from_shard THEN
        PERFORM wfrouter._remote(mv.from_shard, pg_catalog.format('SELECT wf.configure_shard(%L, %L)',
            mv.from_shard, wfrouter._map_with(p, mv.from_shard)));
    END IF;
    -- a CREATE SUBSCRIPTION of a router session that died may still run there
    PERFORM wfrouter._remote(mv.to_shard, pg_catalog.format(
        'SELECT pg_catalog.count(pg_catalog.pg_terminate_backend(a.pid, 10000))::text FROM pg_catalog.pg_stat_activity a '
        'WHERE a.query LIKE %L AND a.pid <> pg_catalog.pg_backend_pid()', 'CREATE SUBSCRIPTION ' OPERATOR(pg_catalog.||) sub OPERATOR(pg_catalog.||) ' %'));
    PERFORM wfrouter._remote_exec(mv.to_shard, pg_catalog.format('DROP SUBSCRIPTION IF EXISTS %I', sub));
    PERFORM wfrouter._remote(mv.to_shard, pg_catalog.format('SELECT wf.drop_partition(%s)::text', p));
    PERFORM wfrouter._remote_exec(mv.from_shard, pg_catalog.format('DROP PUBLICATION IF EXISTS %I', sub));
    PERFORM wfrouter._note(mv.move_id, 'cancelled');
    RETURN pg_catalog.format('partition %s stays on shard "%s"', p, mv.from_shard);
END
$$;
COMMENT ON FUNCTION wfrouter.cancel_move(integer) IS
'For superusers: undoes a move of partition p that has not cut over (the partition stays on its source, the target''s copy and the replication objects go).';

CREATE FUNCTION wfrouter.add_shard(name text, connstr text)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    known record;
    block integer;
    missing text;
    defs text;
    src text;
BEGIN
    PERFORM wfrouter._superuser('add_shard');
    IF name IS NULL OR connstr IS NULL OR EXISTS (SELECT 1 FROM wfrouter.shards s WHERE s.shard OPERATOR(pg_catalog.=) name) THEN
        RAISE EXCEPTION 'shard "%" exists already, or has no name or connection string', name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM wfrouter.partitions) THEN
        RAISE EXCEPTION 'the router has no shards'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Set up the first ones with wfrouter.configure(shards, partitions).';
    END IF;
    -- a shard another router added already: take it as it is
    SELECT * INTO known FROM public.dblink(connstr OPERATOR(pg_catalog.||) ' user=' OPERATOR(pg_catalog.||) pg_catalog.quote_literal(CURRENT_USER::text)
                                           OPERATOR(pg_catalog.||) ' options=''-c search_path=pg_catalog,pg_temp''',
        'SELECT (SELECT s.shard FROM wfshard.self s), wf._id_block()') AS x(shard text, block integer);
    IF known.shard IS NOT NULL AND known.shard OPERATOR(pg_catalog.<>) name THEN
        RAISE EXCEPTION 'the database at "%" is shard "%" already', connstr, known.shard
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF known.shard IS NOT NULL THEN
        block := known.block;
    ELSE
        block := (SELECT COALESCE(pg_catalog.max(s.id_block), 0) OPERATOR(pg_catalog.+) 1 FROM wfrouter.shards s);
    END IF;
    INSERT INTO wfrouter.shards (shard, connstr, id_block) VALUES (name, connstr, block);
    IF known.shard IS NULL THEN
        -- every tenant of the router is a role there
        SELECT pg_catalog.string_agg(r.rolname, ', ' ORDER BY r.rolname) INTO missing
        FROM pg_catalog.pg_roles r
        WHERE r.rolname OPERATOR(pg_catalog.~~) 'wf\_tenant\_%'
          AND wfrouter._remote(name, pg_catalog.format('SELECT pg_catalog.count(*) FROM pg_catalog.pg_roles WHERE rolname = %L', r.rolname)) OPERATOR(pg_catalog.=) '0';
        IF missing IS NOT NULL THEN
            RAISE EXCEPTION 'shard "%" lacks the roles of tenants: %', name, missing
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Create every tenant (wf.create_tenant) and its logins on the new shard first, as on the others.';
        END IF;
        PERFORM wfrouter._push_map(name);
    END IF;
    -- every tenant's definitions, from the first shard; also when the shard
    -- was configured already (by another router, or by an add_shard that
    -- failed after configuring it): what it has stays
    src := (SELECT s.shard FROM wfrouter.shards s WHERE s.shard OPERATOR(pg_catalog.<>) name ORDER BY s.shard COLLATE "C" LIMIT 1);
    defs := wfrouter._remote(src, 'SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(d) ORDER BY d.definition_id), ''[]'') FROM wf.definitions d');
    PERFORM wfrouter._remote(name, pg_catalog.format('SELECT wf.copy_definitions(%L::jsonb)::text', defs));
    RETURN block;
END
$$;
COMMENT ON FUNCTION wfrouter.add_shard(text, text) IS
'For superusers: takes a freshly created wfengine database (every tenant''s role created there) into the cluster as shard name: its own id block, the map, and every tenant''s definitions; it owns no partition until one moves to it (wfrouter.move_partition, wfrouter.rebalance). A shard another router added already is taken as it is. Returns its id block.';

CREATE FUNCTION wfrouter.remove_shard(name text)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p integer;
    target text;
    moved integer := 0;
BEGIN
    PERFORM wfrouter._superuser('remove_shard');
    IF NOT EXISTS (SELECT 1 FROM wfrouter.shards s WHERE s.shard OPERATOR(pg_catalog.=) name) THEN
        RAISE EXCEPTION 'shard "%" does not exist', name USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM wfrouter.shards s WHERE s.shard OPERATOR(pg_catalog.<>) name) THEN
        RAISE EXCEPTION 'shard "%" is the last one', name USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    FOR p IN SELECT m.partition FROM wfrouter.partitions m WHERE m.shard OPERATOR(pg_catalog.=) name ORDER BY m.partition LOOP
        -- the shard with the fewest partitions takes it
        target := (SELECT s.shard FROM wfrouter.shards s WHERE s.shard OPERATOR(pg_catalog.<>) name
                   ORDER BY (SELECT pg_catalog.count(*) FROM wfrouter.partitions m WHERE m.shard OPERATOR(pg_catalog.=) s.shard),
                            s.shard COLLATE "C" LIMIT 1);
        PERFORM wfrouter.move_partition(p, target);
        moved := moved OPERATOR(pg_catalog.+) 1;
    END LOOP;
    DELETE FROM wfrouter.shards s WHERE s.shard OPERATOR(pg_catalog.=) name;
    RETURN moved;
END
$$;
COMMENT ON FUNCTION wfrouter.remove_shard(text) IS
'For superusers: drains shard name (moves each of its partitions to the shard with the fewest, one at a time) and takes it out of the router''s list; returns the number of partitions moved. Its database is left as it is, owning nothing.';

CREATE FUNCTION wfrouter.rebalance(dry_run boolean DEFAULT true)
RETURNS TABLE (partition integer, from_shard text, to_shard text, runs bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    counts jsonb := '{}';
    load jsonb := '{}';
    owner jsonb := '{}';
    s text;
    hi text;
    lo text;
    best integer;
    best_c bigint;
    gap bigint;
    c bigint;
    k text;
    plan jsonb := '[]';
    step jsonb;
BEGIN
    PERFORM wfrouter._superuser('rebalance');
    -- the runs of every partition, from the shard that owns it
    FOR s IN SELECT x.shard FROM wfrouter.shards x ORDER BY x.shard COLLATE "C" LOOP
        load := load OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(s, 0);
        counts := counts OPERATOR(pg_catalog.||) COALESCE(wfrouter._remote(s, pg_catalog.format(
            'SELECT pg_catalog.jsonb_object_agg(q.p, q.n) FROM (SELECT pg_catalog.hashtext(r.tenant_id) & %s AS p, pg_catalog.count(*) AS n '
            'FROM wf.runs r GROUP BY 1) q WHERE q.p = ANY (%L::integer[])',
            pg_catalog.cardinality(wfrouter._map()) OPERATOR(pg_catalog.-) 1,
            ARRAY(SELECT m.partition FROM wfrouter.partitions m WHERE m.shard OPERATOR(pg_catalog.=) s)))::jsonb, '{}');
    END LOOP;
    -- a partition weighs its runs plus one (an empty one still takes new tenants)
    FOR k, s IN SELECT m.partition::text, m.shard FROM wfrouter.partitions m LOOP
        owner := owner OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(k, s);
        load := pg_catalog.jsonb_set(load, ARRAY[s], pg_catalog.to_jsonb((load OPERATOR(pg_catalog.->>) s)::bigint
            OPERATOR(pg_catalog.+) COALESCE((counts OPERATOR(pg_catalog.->>) k)::bigint, 0) OPERATOR(pg_catalog.+) 1));
    END LOOP;
    -- greedy: from the heaviest shard to the lightest, the partition that
    -- brings them closest, while that narrows the gap
    FOR i IN 1..4096 LOOP
        SELECT e.key INTO hi FROM pg_catalog.jsonb_each_text(load) e ORDER BY e.value::bigint DESC, e.key COLLATE "C" LIMIT 1;
        SELECT e.key INTO lo FROM pg_catalog.jsonb_each_text(load) e ORDER BY e.value::bigint, e.key COLLATE "C" LIMIT 1;
        gap := (load OPERATOR(pg_catalog.->>) hi)::bigint OPERATOR(pg_catalog.-) (load OPERATOR(pg_catalog.->>) lo)::bigint;
        best := NULL;
        best_c := NULL;
        FOR k IN SELECT o.key FROM pg_catalog.jsonb_each_text(owner) o WHERE o.value OPERATOR(pg_catalog.=) hi LOOP
            c := COALESCE((counts OPERATOR(pg_catalog.->>) k)::bigint, 0) OPERATOR(pg_catalog.+) 1;
            IF c OPERATOR(pg_catalog.<) gap AND (best_c IS NULL
                OR pg_catalog.abs(gap OPERATOR(pg_catalog.-) (2 OPERATOR(pg_catalog.*) c)) OPERATOR(pg_catalog.<) pg_catalog.abs(gap OPERATOR(pg_catalog.-) (2 OPERATOR(pg_catalog.*) best_c))) THEN
                best := k::integer;
                best_c := c;
            END IF;
        END LOOP;
        EXIT WHEN best IS NULL;
        plan := plan OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
            'partition', best, 'from', hi, 'to', lo, 'runs', best_c OPERATOR(pg_catalog.-) 1));
        owner := pg_catalog.jsonb_set(owner, ARRAY[best::text], pg_catalog.to_jsonb(lo));
        load := pg_catalog.jsonb_set(load, ARRAY[hi], pg_catalog.to_jsonb((load OPERATOR(pg_catalog.->>) hi)::bigint OPERATOR(pg_catalog.-) best_c));
        load := pg_catalog.jsonb_set(load, ARRAY[lo], pg_catalog.to_jsonb((load OPERATOR(pg_catalog.->>) lo)::bigint OPERATOR(pg_catalog.+) best_c));
    END LOOP;
    FOR step IN SELECT x FROM pg_catalog.jsonb_array_elements(plan) x LOOP
        partition := (step OPERATOR(pg_catalog.->>) 'partition')::integer;
        from_shard := step OPERATOR(pg_catalog.->>) 'from';
        to_shard := step OPERATOR(pg_catalog.->>) 'to';
        runs := (step OPERATOR(pg_catalog.->>) 'runs')::bigint;
        IF NOT dry_run THEN
            PERFORM wfrouter.move_partition(partition, to_shard);
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION wfrouter.rebalance(boolean) IS
'For superusers: plans moves that even out the shards'' runs (each partition weighs its runs plus one), greedily from the heaviest shard to the lightest while a move narrows the gap; with dry_run false it makes them, one at a time (progress in wfrouter.moves). Returns the plan.';

-- The API: the same names, arguments and results as on a shard; each
-- runs the same call on the shard of the caller's tenant (written by
-- router/gen_api.py from router/api.txt).

CREATE FUNCTION wfrouter."p:start_run"(definition text, input jsonb DEFAULT '{}'::jsonb, idempotency_key text DEFAULT NULL::text, version integer DEFAULT NULL::integer, traceparent text DEFAULT NULL::text)
RETURNS uuid
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.start_run;
$$;

CREATE FUNCTION wfrouter."r:start_run"(text, jsonb, text, integer, text)
RETURNS uuid
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
            RETURN wfrouter."p:start_run"($1, $2, $3, $4, $5);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.start_run(definition text, input jsonb DEFAULT '{}'::jsonb, idempotency_key text DEFAULT NULL::text, version integer DEFAULT NULL::integer, traceparent text DEFAULT NULL::text)
RETURNS uuid
LANGUAGE sql
AS $$ SELECT wfrouter."r:start_run"($1, $2, $3, $4, $5) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:start_run"(text, jsonb, text, integer, text), wfrouter."r:start_run"(text, jsonb, text, integer, text), wf.start_run(text, jsonb, text, integer, text) TO wfengine_app;

CREATE FUNCTION wfrouter."p:run_status"(run uuid)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.run_status;
$$;

CREATE FUNCTION wfrouter."r:run_status"(uuid)
RETURNS text
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
            RETURN wfrouter."p:run_status"($1);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.run_status(run uuid)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:run_status"($1) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:run_status"(uuid), wfrouter."r:run_status"(uuid), wf.run_status(uuid) TO wfengine_app;

CREATE FUNCTION wfrouter."p:history"(run uuid)
RETURNS TABLE(seq integer, type text, step text, attempt integer, payload jsonb, actor text, created_at timestamp with time zone, hash text)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.history;
$$;

CREATE FUNCTION wfrouter."r:history"(uuid)
RETURNS TABLE("o:seq" integer, "o:type" text, "o:step" text, "o:attempt" integer, "o:payload" jsonb, "o:actor" text, "o:created_at" timestamp with time zone, "o:hash" text)
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
            RETURN QUERY SELECT * FROM wfrouter."p:history"($1);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.history(run uuid)
RETURNS TABLE(seq integer, type text, step text, attempt integer, payload jsonb, actor text, created_at timestamp with time zone, hash text)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:history"($1) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:history"(uuid), wfrouter."r:history"(uuid), wf.history(uuid) TO wfengine_app;

CREATE FUNCTION wfrouter."p:explain"(run uuid)
RETURNS jsonb
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.explain;
$$;

CREATE FUNCTION wfrouter."r:explain"(uuid)
RETURNS jsonb
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
            RETURN wfrouter."p:explain"($1);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.explain(run uuid)
RETURNS jsonb
LANGUAGE sql
AS $$ SELECT wfrouter."r:explain"($1) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:explain"(uuid), wfrouter."r:explain"(uuid), wf.explain(uuid) TO wfengine_app;

CREATE FUNCTION wfrouter."p:verify_run"(run uuid)
RETURNS boolean
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.verify_run;
$$;

CREATE FUNCTION wfrouter."r:verify_run"(uuid)
RETURNS boolean
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
            RETURN wfrouter."p:verify_run"($1);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.verify_run(run uuid)
RETURNS boolean
LANGUAGE sql
AS $$ SELECT wfrouter."r:verify_run"($1) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:verify_run"(uuid), wfrouter."r:verify_run"(uuid), wf.verify_run(uuid) TO wfengine_app;

CREATE FUNCTION wfrouter."p:verify_run"(run uuid, anchor jsonb)
RETURNS boolean
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.verify_run;
$$;

CREATE FUNCTION wfrouter."r:verify_run"(uuid, jsonb)
RETURNS boolean
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
            RETURN wfrouter."p:verify_run"($1, $2);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.verify_run(run uuid, anchor jsonb)
RETURNS boolean
LANGUAGE sql
AS $$ SELECT wfrouter."r:verify_run"($1, $2) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:verify_run"(uuid, jsonb), wfrouter."r:verify_run"(uuid, jsonb), wf.verify_run(uuid, jsonb) TO wfengine_app;

CREATE FUNCTION wfrouter."p:definition_graph"(definition text, version integer DEFAULT NULL::integer, format text DEFAULT 'mermaid'::text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.definition_graph;
$$;

CREATE FUNCTION wfrouter."r:definition_graph"(text, integer, text)
RETURNS text
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
            RETURN wfrouter."p:definition_graph"($1, $2, $3);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.definition_graph(definition text, version integer DEFAULT NULL::integer, format text DEFAULT 'mermaid'::text)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:definition_graph"($1, $2, $3) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:definition_graph"(text, integer, text), wfrouter."r:definition_graph"(text, integer, text), wf.definition_graph(text, integer, text) TO wfengine_app;

CREATE FUNCTION wfrouter."p:run_graph"(run uuid, format text DEFAULT 'mermaid'::text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.run_graph;
$$;

CREATE FUNCTION wfrouter."r:run_graph"(uuid, text)
RETURNS text
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
            RETURN wfrouter."p:run_graph"($1, $2);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.run_graph(run uuid, format text DEFAULT 'mermaid'::text)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:run_graph"($1, $2) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:run_graph"(uuid, text), wfrouter."r:run_graph"(uuid, text), wf.run_graph(uuid, text) TO wfengine_app;

CREATE FUNCTION wfrouter."p:signal"(run uuid, name text, payload jsonb DEFAULT '{}'::jsonb, event_id text DEFAULT NULL::text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.signal;
$$;

CREATE FUNCTION wfrouter."r:signal"(uuid, text, jsonb, text)
RETURNS text
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
            RETURN wfrouter."p:signal"($1, $2, $3, $4);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.signal(run uuid, name text, payload jsonb DEFAULT '{}'::jsonb, event_id text DEFAULT NULL::text)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:signal"($1, $2, $3, $4) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:signal"(uuid, text, jsonb, text), wfrouter."r:signal"(uuid, text, jsonb, text), wf.signal(uuid, text, jsonb, text) TO wfengine_app;

CREATE FUNCTION wfrouter."p:send_event"(correlation_key text, name text, payload jsonb DEFAULT '{}'::jsonb, event_id text DEFAULT NULL::text, keep interval DEFAULT '1 day'::interval)
RETURNS TABLE(run_id uuid, outcome text)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.send_event;
$$;

CREATE FUNCTION wfrouter."r:send_event"(text, text, jsonb, text, interval)
RETURNS TABLE("o:run_id" uuid, "o:outcome" text)
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
            RETURN QUERY SELECT * FROM wfrouter."p:send_event"($1, $2, $3, $4, $5);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.send_event(correlation_key text, name text, payload jsonb DEFAULT '{}'::jsonb, event_id text DEFAULT NULL::text, keep interval DEFAULT '1 day'::interval)
RETURNS TABLE(run_id uuid, outcome text)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:send_event"($1, $2, $3, $4, $5) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:send_event"(text, text, jsonb, text, interval), wfrouter."r:send_event"(text, text, jsonb, text, interval), wf.send_event(text, text, jsonb, text, interval) TO wfengine_app;

CREATE FUNCTION wfrouter."p:decide"(token text, decision text, approver text, comment text DEFAULT NULL::text, data jsonb DEFAULT NULL::jsonb)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.decide;
$$;

CREATE FUNCTION wfrouter."r:decide"(text, text, text, text, jsonb)
RETURNS text
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
            RETURN wfrouter."p:decide"($1, $2, $3, $4, $5);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.decide(token text, decision text, approver text, comment text DEFAULT NULL::text, data jsonb DEFAULT NULL::jsonb)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:decide"($1, $2, $3, $4, $5) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:decide"(text, text, text, text, jsonb), wfrouter."r:decide"(text, text, text, text, jsonb), wf.decide(text, text, text, text, jsonb) TO wfengine_approver;

CREATE FUNCTION wfrouter."p:terminate_run"(run uuid, reason text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.terminate_run;
$$;

CREATE FUNCTION wfrouter."r:terminate_run"(uuid, text)
RETURNS text
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
            RETURN wfrouter."p:terminate_run"($1, $2);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.terminate_run(run uuid, reason text)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:terminate_run"($1, $2) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:terminate_run"(uuid, text), wfrouter."r:terminate_run"(uuid, text), wf.terminate_run(uuid, text) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:update_context"(run uuid, patch jsonb, reason text)
RETURNS jsonb
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.update_context;
$$;

CREATE FUNCTION wfrouter."r:update_context"(uuid, jsonb, text)
RETURNS jsonb
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
            RETURN wfrouter."p:update_context"($1, $2, $3);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.update_context(run uuid, patch jsonb, reason text)
RETURNS jsonb
LANGUAGE sql
AS $$ SELECT wfrouter."r:update_context"($1, $2, $3) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:update_context"(uuid, jsonb, text), wfrouter."r:update_context"(uuid, jsonb, text), wf.update_context(uuid, jsonb, text) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:pause_run"(run uuid, reason text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.pause_run;
$$;

CREATE FUNCTION wfrouter."r:pause_run"(uuid, text)
RETURNS text
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
            RETURN wfrouter."p:pause_run"($1, $2);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.pause_run(run uuid, reason text)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:pause_run"($1, $2) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:pause_run"(uuid, text), wfrouter."r:pause_run"(uuid, text), wf.pause_run(uuid, text) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:resume_run"(run uuid, reason text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.resume_run;
$$;

CREATE FUNCTION wfrouter."r:resume_run"(uuid, text)
RETURNS text
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
            RETURN wfrouter."p:resume_run"($1, $2);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.resume_run(run uuid, reason text)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:resume_run"($1, $2) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:resume_run"(uuid, text), wfrouter."r:resume_run"(uuid, text), wf.resume_run(uuid, text) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:retry_step"(run uuid, reason text, run_timeout interval DEFAULT NULL::interval)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.retry_step;
$$;

CREATE FUNCTION wfrouter."r:retry_step"(uuid, text, interval)
RETURNS text
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
            RETURN wfrouter."p:retry_step"($1, $2, $3);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.retry_step(run uuid, reason text, run_timeout interval DEFAULT NULL::interval)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:retry_step"($1, $2, $3) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:retry_step"(uuid, text, interval), wfrouter."r:retry_step"(uuid, text, interval), wf.retry_step(uuid, text, interval) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:skip_step"(run uuid, output jsonb, reason text, step text DEFAULT NULL::text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.skip_step;
$$;

CREATE FUNCTION wfrouter."r:skip_step"(uuid, jsonb, text, text)
RETURNS text
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
            RETURN wfrouter."p:skip_step"($1, $2, $3, $4);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.skip_step(run uuid, output jsonb, reason text, step text DEFAULT NULL::text)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:skip_step"($1, $2, $3, $4) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:skip_step"(uuid, jsonb, text, text), wfrouter."r:skip_step"(uuid, jsonb, text, text), wf.skip_step(uuid, jsonb, text, text) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:cancel_run"(run uuid, reason text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.cancel_run;
$$;

CREATE FUNCTION wfrouter."r:cancel_run"(uuid, text)
RETURNS text
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
            RETURN wfrouter."p:cancel_run"($1, $2);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.cancel_run(run uuid, reason text)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:cancel_run"($1, $2) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:cancel_run"(uuid, text), wfrouter."r:cancel_run"(uuid, text), wf.cancel_run(uuid, text) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:migrate_run"(run uuid, to_version integer, reason text)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.migrate_run;
$$;

CREATE FUNCTION wfrouter."r:migrate_run"(uuid, integer, text)
RETURNS text
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
            RETURN wfrouter."p:migrate_run"($1, $2, $3);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.migrate_run(run uuid, to_version integer, reason text)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:migrate_run"($1, $2, $3) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:migrate_run"(uuid, integer, text), wfrouter."r:migrate_run"(uuid, integer, text), wf.migrate_run(uuid, integer, text) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:cancel_runs"(reason text, filter jsonb DEFAULT '{}'::jsonb, max_runs integer DEFAULT 100, after uuid DEFAULT NULL::uuid)
RETURNS TABLE(run_id uuid, outcome text, detail text)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.cancel_runs;
$$;

CREATE FUNCTION wfrouter."r:cancel_runs"(text, jsonb, integer, uuid)
RETURNS TABLE("o:run_id" uuid, "o:outcome" text, "o:detail" text)
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
            RETURN QUERY SELECT * FROM wfrouter."p:cancel_runs"($1, $2, $3, $4);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.cancel_runs(reason text, filter jsonb DEFAULT '{}'::jsonb, max_runs integer DEFAULT 100, after uuid DEFAULT NULL::uuid)
RETURNS TABLE(run_id uuid, outcome text, detail text)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:cancel_runs"($1, $2, $3, $4) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:cancel_runs"(text, jsonb, integer, uuid), wfrouter."r:cancel_runs"(text, jsonb, integer, uuid), wf.cancel_runs(text, jsonb, integer, uuid) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:retry_runs"(reason text, filter jsonb DEFAULT '{}'::jsonb, max_runs integer DEFAULT 100, after uuid DEFAULT NULL::uuid)
RETURNS TABLE(run_id uuid, outcome text, detail text)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.retry_runs;
$$;

CREATE FUNCTION wfrouter."r:retry_runs"(text, jsonb, integer, uuid)
RETURNS TABLE("o:run_id" uuid, "o:outcome" text, "o:detail" text)
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
            RETURN QUERY SELECT * FROM wfrouter."p:retry_runs"($1, $2, $3, $4);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.retry_runs(reason text, filter jsonb DEFAULT '{}'::jsonb, max_runs integer DEFAULT 100, after uuid DEFAULT NULL::uuid)
RETURNS TABLE(run_id uuid, outcome text, detail text)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:retry_runs"($1, $2, $3, $4) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:retry_runs"(text, jsonb, integer, uuid), wfrouter."r:retry_runs"(text, jsonb, integer, uuid), wf.retry_runs(text, jsonb, integer, uuid) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:resume_runs"(reason text, filter jsonb DEFAULT '{}'::jsonb, max_runs integer DEFAULT 100, after uuid DEFAULT NULL::uuid)
RETURNS TABLE(run_id uuid, outcome text, detail text)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.resume_runs;
$$;

CREATE FUNCTION wfrouter."r:resume_runs"(text, jsonb, integer, uuid)
RETURNS TABLE("o:run_id" uuid, "o:outcome" text, "o:detail" text)
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
            RETURN QUERY SELECT * FROM wfrouter."p:resume_runs"($1, $2, $3, $4);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.resume_runs(reason text, filter jsonb DEFAULT '{}'::jsonb, max_runs integer DEFAULT 100, after uuid DEFAULT NULL::uuid)
RETURNS TABLE(run_id uuid, outcome text, detail text)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:resume_runs"($1, $2, $3, $4) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:resume_runs"(text, jsonb, integer, uuid), wfrouter."r:resume_runs"(text, jsonb, integer, uuid), wf.resume_runs(text, jsonb, integer, uuid) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:revoke_approval_tokens"(run uuid, step text, reason text)
RETURNS integer
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.revoke_approval_tokens;
$$;

CREATE FUNCTION wfrouter."r:revoke_approval_tokens"(uuid, text, text)
RETURNS integer
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
            RETURN wfrouter."p:revoke_approval_tokens"($1, $2, $3);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.revoke_approval_tokens(run uuid, step text, reason text)
RETURNS integer
LANGUAGE sql
AS $$ SELECT wfrouter."r:revoke_approval_tokens"($1, $2, $3) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:revoke_approval_tokens"(uuid, text, text), wfrouter."r:revoke_approval_tokens"(uuid, text, text), wf.revoke_approval_tokens(uuid, text, text) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:reissue_approval_tokens"(run uuid, step text, reason text)
RETURNS bigint
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.reissue_approval_tokens;
$$;

CREATE FUNCTION wfrouter."r:reissue_approval_tokens"(uuid, text, text)
RETURNS bigint
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
            RETURN wfrouter."p:reissue_approval_tokens"($1, $2, $3);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.reissue_approval_tokens(run uuid, step text, reason text)
RETURNS bigint
LANGUAGE sql
AS $$ SELECT wfrouter."r:reissue_approval_tokens"($1, $2, $3) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:reissue_approval_tokens"(uuid, text, text), wfrouter."r:reissue_approval_tokens"(uuid, text, text), wf.reissue_approval_tokens(uuid, text, text) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:set_approvers"(run uuid, step text, approvers text[], reason text)
RETURNS void
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.set_approvers;
$$;

CREATE FUNCTION wfrouter."r:set_approvers"(uuid, text, text[], text)
RETURNS void
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
            RETURN wfrouter."p:set_approvers"($1, $2, $3, $4);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.set_approvers(run uuid, step text, approvers text[], reason text)
RETURNS void
LANGUAGE sql
AS $$ SELECT wfrouter."r:set_approvers"($1, $2, $3, $4) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:set_approvers"(uuid, text, text[], text), wfrouter."r:set_approvers"(uuid, text, text[], text), wf.set_approvers(uuid, text, text[], text) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:set_legal_hold"(run uuid, hold boolean, reason text)
RETURNS boolean
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.set_legal_hold;
$$;

CREATE FUNCTION wfrouter."r:set_legal_hold"(uuid, boolean, text)
RETURNS boolean
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
            RETURN wfrouter."p:set_legal_hold"($1, $2, $3);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.set_legal_hold(run uuid, hold boolean, reason text)
RETURNS boolean
LANGUAGE sql
AS $$ SELECT wfrouter."r:set_legal_hold"($1, $2, $3) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:set_legal_hold"(uuid, boolean, text), wfrouter."r:set_legal_hold"(uuid, boolean, text), wf.set_legal_hold(uuid, boolean, text) TO wfengine_operator;

CREATE FUNCTION wfrouter."p:claim_tasks"(queue text, worker text, max_tasks integer DEFAULT 1, lease interval DEFAULT '00:00:30'::interval, wait interval DEFAULT NULL::interval)
RETURNS TABLE(task_id bigint, run_id uuid, step text, attempt integer, fence bigint, idempotency_key text, input jsonb, lease_expires_at timestamp with time zone, queue text, activity text, deliveries integer)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.claim_tasks;
$$;

CREATE FUNCTION wfrouter."r:claim_tasks"(text, text, integer, interval, interval)
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
            RETURN QUERY SELECT * FROM wfrouter."p:claim_tasks"($1, $2, $3, $4, $5);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.claim_tasks(queue text, worker text, max_tasks integer DEFAULT 1, lease interval DEFAULT '00:00:30'::interval, wait interval DEFAULT NULL::interval)
RETURNS TABLE(task_id bigint, run_id uuid, step text, attempt integer, fence bigint, idempotency_key text, input jsonb, lease_expires_at timestamp with time zone, queue text, activity text, deliveries integer)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:claim_tasks"($1, $2, $3, $4, $5) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:claim_tasks"(text, text, integer, interval, interval), wfrouter."r:claim_tasks"(text, text, integer, interval, interval), wf.claim_tasks(text, text, integer, interval, interval) TO wfengine_worker;

CREATE FUNCTION wfrouter."p:claim_tasks_any"(queues text[], worker text, max_tasks integer DEFAULT 1, lease interval DEFAULT '00:00:30'::interval, wait interval DEFAULT NULL::interval)
RETURNS TABLE(task_id bigint, run_id uuid, step text, attempt integer, fence bigint, idempotency_key text, input jsonb, lease_expires_at timestamp with time zone, queue text, activity text, deliveries integer)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.claim_tasks_any;
$$;

CREATE FUNCTION wfrouter."r:claim_tasks_any"(text[], text, integer, interval, interval)
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
            RETURN QUERY SELECT * FROM wfrouter."p:claim_tasks_any"($1, $2, $3, $4, $5);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.claim_tasks_any(queues text[], worker text, max_tasks integer DEFAULT 1, lease interval DEFAULT '00:00:30'::interval, wait interval DEFAULT NULL::interval)
RETURNS TABLE(task_id bigint, run_id uuid, step text, attempt integer, fence bigint, idempotency_key text, input jsonb, lease_expires_at timestamp with time zone, queue text, activity text, deliveries integer)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:claim_tasks_any"($1, $2, $3, $4, $5) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:claim_tasks_any"(text[], text, integer, interval, interval), wfrouter."r:claim_tasks_any"(text[], text, integer, interval, interval), wf.claim_tasks_any(text[], text, integer, interval, interval) TO wfengine_worker;

CREATE FUNCTION wfrouter."p:complete_task"(task_id bigint, fence bigint, output jsonb DEFAULT '{}'::jsonb)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.complete_task;
$$;

CREATE FUNCTION wfrouter."r:complete_task"(bigint, bigint, jsonb)
RETURNS text
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
            RETURN wfrouter."p:complete_task"($1, $2, $3);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.complete_task(task_id bigint, fence bigint, output jsonb DEFAULT '{}'::jsonb)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:complete_task"($1, $2, $3) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:complete_task"(bigint, bigint, jsonb), wfrouter."r:complete_task"(bigint, bigint, jsonb), wf.complete_task(bigint, bigint, jsonb) TO wfengine_worker;

CREATE FUNCTION wfrouter."p:fail_task"(task_id bigint, fence bigint, error jsonb, retryable boolean DEFAULT true)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.fail_task;
$$;

CREATE FUNCTION wfrouter."r:fail_task"(bigint, bigint, jsonb, boolean)
RETURNS text
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
            RETURN wfrouter."p:fail_task"($1, $2, $3, $4);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.fail_task(task_id bigint, fence bigint, error jsonb, retryable boolean DEFAULT true)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:fail_task"($1, $2, $3, $4) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:fail_task"(bigint, bigint, jsonb, boolean), wfrouter."r:fail_task"(bigint, bigint, jsonb, boolean), wf.fail_task(bigint, bigint, jsonb, boolean) TO wfengine_worker;

CREATE FUNCTION wfrouter."p:heartbeat"(task_id bigint, fence bigint, details jsonb DEFAULT NULL::jsonb)
RETURNS text
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.heartbeat;
$$;

CREATE FUNCTION wfrouter."r:heartbeat"(bigint, bigint, jsonb)
RETURNS text
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
            RETURN wfrouter."p:heartbeat"($1, $2, $3);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.heartbeat(task_id bigint, fence bigint, details jsonb DEFAULT NULL::jsonb)
RETURNS text
LANGUAGE sql
AS $$ SELECT wfrouter."r:heartbeat"($1, $2, $3) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:heartbeat"(bigint, bigint, jsonb), wfrouter."r:heartbeat"(bigint, bigint, jsonb), wf.heartbeat(bigint, bigint, jsonb) TO wfengine_worker;

CREATE FUNCTION wfrouter."p:complete_tasks"(task_ids bigint[], fences bigint[], outputs jsonb[] DEFAULT NULL::jsonb[])
RETURNS TABLE(task_id bigint, answer text)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.complete_tasks;
$$;

CREATE FUNCTION wfrouter."r:complete_tasks"(bigint[], bigint[], jsonb[])
RETURNS TABLE("o:task_id" bigint, "o:answer" text)
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
            RETURN QUERY SELECT * FROM wfrouter."p:complete_tasks"($1, $2, $3);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.complete_tasks(task_ids bigint[], fences bigint[], outputs jsonb[] DEFAULT NULL::jsonb[])
RETURNS TABLE(task_id bigint, answer text)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:complete_tasks"($1, $2, $3) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:complete_tasks"(bigint[], bigint[], jsonb[]), wfrouter."r:complete_tasks"(bigint[], bigint[], jsonb[]), wf.complete_tasks(bigint[], bigint[], jsonb[]) TO wfengine_worker;

CREATE FUNCTION wfrouter."p:fail_tasks"(task_ids bigint[], fences bigint[], errors jsonb[], retryables boolean[] DEFAULT NULL::boolean[])
RETURNS TABLE(task_id bigint, answer text)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.fail_tasks;
$$;

CREATE FUNCTION wfrouter."r:fail_tasks"(bigint[], bigint[], jsonb[], boolean[])
RETURNS TABLE("o:task_id" bigint, "o:answer" text)
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
            RETURN QUERY SELECT * FROM wfrouter."p:fail_tasks"($1, $2, $3, $4);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.fail_tasks(task_ids bigint[], fences bigint[], errors jsonb[], retryables boolean[] DEFAULT NULL::boolean[])
RETURNS TABLE(task_id bigint, answer text)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:fail_tasks"($1, $2, $3, $4) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:fail_tasks"(bigint[], bigint[], jsonb[], boolean[]), wfrouter."r:fail_tasks"(bigint[], bigint[], jsonb[], boolean[]), wf.fail_tasks(bigint[], bigint[], jsonb[], boolean[]) TO wfengine_worker;

CREATE FUNCTION wfrouter."p:complete_and_claim"(task_id bigint, fence bigint, output jsonb, queue text, worker text, max_tasks integer DEFAULT 1, lease interval DEFAULT '00:00:30'::interval)
RETURNS TABLE(answer text, task_id bigint, run_id uuid, step text, attempt integer, fence bigint, idempotency_key text, input jsonb, lease_expires_at timestamp with time zone, queue text, activity text, deliveries integer)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.complete_and_claim;
$$;

CREATE FUNCTION wfrouter."r:complete_and_claim"(bigint, bigint, jsonb, text, text, integer, interval)
RETURNS TABLE("o:answer" text, "o:task_id" bigint, "o:run_id" uuid, "o:step" text, "o:attempt" integer, "o:fence" bigint, "o:idempotency_key" text, "o:input" jsonb, "o:lease_expires_at" timestamp with time zone, "o:queue" text, "o:activity" text, "o:deliveries" integer)
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
            RETURN QUERY SELECT * FROM wfrouter."p:complete_and_claim"($1, $2, $3, $4, $5, $6, $7);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.complete_and_claim(task_id bigint, fence bigint, output jsonb, queue text, worker text, max_tasks integer DEFAULT 1, lease interval DEFAULT '00:00:30'::interval)
RETURNS TABLE(answer text, task_id bigint, run_id uuid, step text, attempt integer, fence bigint, idempotency_key text, input jsonb, lease_expires_at timestamp with time zone, queue text, activity text, deliveries integer)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:complete_and_claim"($1, $2, $3, $4, $5, $6, $7) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:complete_and_claim"(bigint, bigint, jsonb, text, text, integer, interval), wfrouter."r:complete_and_claim"(bigint, bigint, jsonb, text, text, integer, interval), wf.complete_and_claim(bigint, bigint, jsonb, text, text, integer, interval) TO wfengine_worker;

CREATE FUNCTION wfrouter."p:complete_tasks_and_claim"(task_ids bigint[], fences bigint[], outputs jsonb[], queue text, worker text, max_tasks integer DEFAULT 10, lease interval DEFAULT '00:00:30'::interval)
RETURNS TABLE(answers text[], task_id bigint, run_id uuid, step text, attempt integer, fence bigint, idempotency_key text, input jsonb, lease_expires_at timestamp with time zone, queue text, activity text, deliveries integer)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.complete_tasks_and_claim;
$$;

CREATE FUNCTION wfrouter."r:complete_tasks_and_claim"(bigint[], bigint[], jsonb[], text, text, integer, interval)
RETURNS TABLE("o:answers" text[], "o:task_id" bigint, "o:run_id" uuid, "o:step" text, "o:attempt" integer, "o:fence" bigint, "o:idempotency_key" text, "o:input" jsonb, "o:lease_expires_at" timestamp with time zone, "o:queue" text, "o:activity" text, "o:deliveries" integer)
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
            RETURN QUERY SELECT * FROM wfrouter."p:complete_tasks_and_claim"($1, $2, $3, $4, $5, $6, $7);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.complete_tasks_and_claim(task_ids bigint[], fences bigint[], outputs jsonb[], queue text, worker text, max_tasks integer DEFAULT 10, lease interval DEFAULT '00:00:30'::interval)
RETURNS TABLE(answers text[], task_id bigint, run_id uuid, step text, attempt integer, fence bigint, idempotency_key text, input jsonb, lease_expires_at timestamp with time zone, queue text, activity text, deliveries integer)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:complete_tasks_and_claim"($1, $2, $3, $4, $5, $6, $7) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:complete_tasks_and_claim"(bigint[], bigint[], jsonb[], text, text, integer, interval), wfrouter."r:complete_tasks_and_claim"(bigint[], bigint[], jsonb[], text, text, integer, interval), wf.complete_tasks_and_claim(bigint[], bigint[], jsonb[], text, text, integer, interval) TO wfengine_worker;

CREATE FUNCTION wfrouter."p:issue_approval_tokens"(task_id bigint, fence bigint)
RETURNS TABLE(approver text, decision text, token text, expires_at timestamp with time zone)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.issue_approval_tokens;
$$;

CREATE FUNCTION wfrouter."r:issue_approval_tokens"(bigint, bigint)
RETURNS TABLE("o:approver" text, "o:decision" text, "o:token" text, "o:expires_at" timestamp with time zone)
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
            RETURN QUERY SELECT * FROM wfrouter."p:issue_approval_tokens"($1, $2);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.issue_approval_tokens(task_id bigint, fence bigint)
RETURNS TABLE(approver text, decision text, token text, expires_at timestamp with time zone)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:issue_approval_tokens"($1, $2) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:issue_approval_tokens"(bigint, bigint), wfrouter."r:issue_approval_tokens"(bigint, bigint), wf.issue_approval_tokens(bigint, bigint) TO wfengine_worker;

CREATE FUNCTION wfrouter."p:start_runs"(definition text, inputs jsonb[], idempotency_keys text[] DEFAULT NULL::text[], version integer DEFAULT NULL::integer)
RETURNS TABLE(run_id uuid)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.start_runs;
$$;

CREATE FUNCTION wfrouter."r:start_runs"(text, jsonb[], text[], integer)
RETURNS TABLE("o:run_id" uuid)
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
            RETURN QUERY SELECT * FROM wfrouter."p:start_runs"($1, $2, $3, $4);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.start_runs(definition text, inputs jsonb[], idempotency_keys text[] DEFAULT NULL::text[], version integer DEFAULT NULL::integer)
RETURNS TABLE(run_id uuid)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:start_runs"($1, $2, $3, $4) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:start_runs"(text, jsonb[], text[], integer), wfrouter."r:start_runs"(text, jsonb[], text[], integer), wf.start_runs(text, jsonb[], text[], integer) TO wfengine_app;

CREATE FUNCTION wfrouter."p:list_runs"(filter jsonb DEFAULT '{}'::jsonb, max_runs integer DEFAULT 100, after uuid DEFAULT NULL::uuid)
RETURNS TABLE(run_id uuid, definition_name text, definition_version integer, status text, current_step text, created_at timestamp with time zone, finished_at timestamp with time zone)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.list_runs;
$$;

CREATE FUNCTION wfrouter."r:list_runs"(jsonb, integer, uuid)
RETURNS TABLE("o:run_id" uuid, "o:definition_name" text, "o:definition_version" integer, "o:status" text, "o:current_step" text, "o:created_at" timestamp with time zone, "o:finished_at" timestamp with time zone)
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
            RETURN QUERY SELECT * FROM wfrouter."p:list_runs"($1, $2, $3);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.list_runs(filter jsonb DEFAULT '{}'::jsonb, max_runs integer DEFAULT 100, after uuid DEFAULT NULL::uuid)
RETURNS TABLE(run_id uuid, definition_name text, definition_version integer, status text, current_step text, created_at timestamp with time zone, finished_at timestamp with time zone)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:list_runs"($1, $2, $3) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:list_runs"(jsonb, integer, uuid), wfrouter."r:list_runs"(jsonb, integer, uuid), wf.list_runs(jsonb, integer, uuid) TO wfengine_app;


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
GRANT EXECUTE ON FUNCTION wfrouter._retry(integer, text, text, text, text), wfrouter._learn_map(text)
    TO wfengine_app, wfengine_worker, wfengine_approver, wfengine_operator, wfengine_admin;
