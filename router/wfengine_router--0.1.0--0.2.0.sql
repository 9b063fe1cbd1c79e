/* router/wfengine_router--0.1.0--0.2.0.sql -- upgrade wfengine_router from 0.1.0 to 0.2.0 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION wfengine_router UPDATE TO '0.2.0'" to load this file. \quit

/*
 * 0.1.0 is released (with wfengine 0.2.0): router/wfengine_router--0.1.0.sql
 * never changes again (sql/released.sha256).  0.2.0 is not released yet:
 * until it is, this file is edited in place, each function defined once,
 * as it is meant to end up.  Update the routers after the shards
 * (docs/scale-out.md, "A rolling upgrade"): a shard still on wfengine 0.2.0
 * answers a call of a function it does not have (wf.start_and_claim) with
 * 42883.
 *
 * 0.2.0 routes wf.start_and_claim and wf.run_context (issue 31), and makes partition moves
 * safe and bounded (issue 30): moves through several routers exclude each
 * other, every wait of a move has a deadline, a copy that cannot go on
 * starts again, a cut-over left behind by a dead router session is ended,
 * the cut-over is shorter, and a move run again after it finished is done.
 *
 * A function new here that is not in the table of docs/scale-out.md,
 * "router privileges", is executed by no role but its owner (REVOKE ALL
 * ... FROM PUBLIC; TAP 120_shards checks it).  A function of 0.1.0
 * replaced here (CREATE OR REPLACE) keeps its privileges and comment.
 */

-- ==== routed eager start (issue 31) ====
-- wf.start_and_claim (wfengine 0.3.0), routed by tenant: written by
-- router/gen_api.py from its line of router/api.txt
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

-- ==== routed context of a run (issue 31) ====
-- wf.run_context (wfengine 0.3.0), routed by tenant: written by
-- router/gen_api.py from the last line of router/api.txt
CREATE FUNCTION wfrouter."p:run_context"(run uuid)
RETURNS jsonb
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.run_context;
$$;

CREATE FUNCTION wfrouter."r:run_context"(uuid)
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
            RETURN wfrouter."p:run_context"($1);
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.run_context(run uuid)
RETURNS jsonb
LANGUAGE sql
AS $$ SELECT wfrouter."r:run_context"($1) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:run_context"(uuid), wfrouter."r:run_context"(uuid), wf.run_context(uuid) TO wfengine_app;

REVOKE ALL ON FUNCTION wfrouter."p:run_context"(uuid), wfrouter."r:run_context"(uuid),
    wf.run_context(uuid) FROM PUBLIC;

-- ==== connections to the shards (issue 30) ====
-- Every statement the router sends a shard waits for its answer only as
-- long as the shard is alive.  PostgreSQL 15's dblink waits for an answer
-- in libpq, uninterruptibly and without end, and a Unix socket has no
-- keepalive: a shard that accepts connections and answers nothing (a
-- SIGSTOP, a hung host) kept a move (or a router session learning a map
-- from it) waiting for ever.  Each statement is now sent without waiting
-- (dblink_send_query) and its answer looked for at growing intervals
-- (0.2 ms to 5 ms; pg_sleep, so that a cancellation is served); each time
-- wfrouter.shard_timeout passes without it (default 10 s: a setting of
-- the session, role or database), the shard is asked for a SELECT 1 on a
-- new connection, and with no answer to that within the timeout either
-- the statement's connection is closed and it fails with 08006 naming the
-- shard.  The timeout is the connect timeout too.

-- wfrouter.shard_timeout of this session, checked
CREATE FUNCTION wfrouter._shard_timeout()
RETURNS interval
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s text := pg_catalog.current_setting('wfrouter.shard_timeout', true);
    v interval;
BEGIN
    IF s IS NULL OR s OPERATOR(pg_catalog.=) '' THEN
        RETURN interval '10 seconds';
    END IF;
    BEGIN
        v := s::interval;
    EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR interval_field_overflow THEN
        v := NULL;
    END;
    IF v IS NULL OR v OPERATOR(pg_catalog.<) interval '1 second' OR v OPERATOR(pg_catalog.>) interval '1 day' THEN
        RAISE EXCEPTION 'invalid value for wfrouter.shard_timeout: "%"', s
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'An interval from 1 second to 1 day, such as ''10s'' (how long the router waits for a shard''s answer).';
    END IF;
    RETURN v;
END
$$;

-- a shard's connection string, as the current user (a superuser: dblink),
-- with a connect timeout of wfrouter.shard_timeout (whole seconds, at
-- least 2: libpq's) unless the shard's string sets one
CREATE OR REPLACE FUNCTION wfrouter._connstr(shard text)
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
    RETURN wfrouter._connstr_of(c);
END
$$;

-- connection string c (a shard's, or one wfrouter.add_shard is given) as
-- the router connects with it: the connect timeout, the current user, the
-- pinned search_path (the statements sent run as a superuser and are not
-- all schema-qualified)
CREATE FUNCTION wfrouter._connstr_of(c text)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (libpq takes the last of a key given twice: the shard's string wins)
    RETURN 'connect_timeout=' OPERATOR(pg_catalog.||) wfrouter._connect_timeout() OPERATOR(pg_catalog.||) ' '
        OPERATOR(pg_catalog.||) c OPERATOR(pg_catalog.||) ' user='
        OPERATOR(pg_catalog.||) pg_catalog.quote_literal(CURRENT_USER::text)
        OPERATOR(pg_catalog.||) ' options=''-c search_path=pg_catalog,pg_temp''';
END
$$;

-- libpq's connect_timeout (whole seconds, at least 2) for
-- wfrouter.shard_timeout
CREATE FUNCTION wfrouter._connect_timeout()
RETURNS integer
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT GREATEST(2, pg_catalog.ceil(EXTRACT(epoch FROM wfrouter._shard_timeout())))::integer
$$;

-- closes connection conn of this session, if open (also when its shard
-- went away)
CREATE FUNCTION wfrouter._poll_close(conn text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF conn OPERATOR(pg_catalog.=) ANY (COALESCE(public.dblink_get_connections(), '{}')) THEN
        PERFORM public.dblink_disconnect(conn);
    END IF;
END
$$;

-- whether the statement sent on conn (dblink_send_query) has its answer
-- by until, looking at growing intervals (0.2 ms to 5 ms; pg_sleep, so
-- that a cancellation is served)
CREATE FUNCTION wfrouter._answered_by(conn text, until timestamptz)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    nap double precision := 0.0002;
BEGIN
    WHILE public.dblink_is_busy(conn) OPERATOR(pg_catalog.=) 1 LOOP
        IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) until THEN
            RETURN false;
        END IF;
        PERFORM pg_catalog.pg_sleep(nap);
        nap := LEAST(nap OPERATOR(pg_catalog.*) 2, 0.005);
    END LOOP;
    RETURN true;
END
$$;

-- whether shard answers a new connection's SELECT 1 within timeout
CREATE FUNCTION wfrouter._alive(shard text, timeout interval)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    conn text := 'wfrouter_probe';
    deadline timestamptz := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) timeout;
    ok boolean := false;
BEGIN
    PERFORM wfrouter._poll_close(conn);
    BEGIN
        PERFORM public.dblink_connect(conn, wfrouter._connstr(shard));
        ok := public.dblink_send_query(conn, 'SELECT 1') OPERATOR(pg_catalog.=) 1
              AND wfrouter._answered_by(conn, deadline);
    EXCEPTION WHEN query_canceled THEN
        PERFORM wfrouter._poll_close(conn);
        RAISE;
    WHEN OTHERS THEN
        ok := false;                -- (no connection: not alive)
    END;
    PERFORM wfrouter._poll_close(conn);
    RETURN ok;
END
$$;

-- waits for the answer of the statement sent on conn (dblink_send_query)
-- to shard, as long as the shard is alive: each time wfrouter.shard_timeout
-- passes without the answer, it asks the shard for a SELECT 1 on a new
-- connection (wfrouter._alive); with no answer to that either within
-- wfrouter.shard_timeout, closes conn and fails with 08006 naming the
-- shard.  A long statement (the verification of a large partition, the
-- copy's start waiting for the source's transactions) goes on while its
-- shard answers.
CREATE FUNCTION wfrouter._await(conn text, shard text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    timeout interval := wfrouter._shard_timeout();
BEGIN
    WHILE NOT wfrouter._answered_by(conn, pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) timeout) LOOP
        IF NOT wfrouter._alive(shard, timeout) THEN
            PERFORM wfrouter._poll_close(conn);
            RAISE EXCEPTION 'shard "%" did not answer within %', shard, timeout
                USING ERRCODE = 'connection_failure',
                      HINT = 'It accepts no connection, or answers none (a stopped or overloaded server?); wfrouter.shard_timeout sets how long the router waits.';
        END IF;
    END LOOP;
END
$$;

-- sends sql on the open connection conn to shard and waits for its
-- answer (wfrouter._await); the caller reads it with dblink_get_result
CREATE FUNCTION wfrouter._send(conn text, shard text, sql text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF public.dblink_send_query(conn, sql) OPERATOR(pg_catalog.<>) 1 THEN
        PERFORM wfrouter._poll_close(conn);
        RAISE EXCEPTION 'could not send a statement to shard "%"', shard
            USING ERRCODE = 'connection_failure';
    END IF;
    PERFORM wfrouter._await(conn, shard);
END
$$;

-- sql on the open connection conn to shard, waited for while the shard is
-- alive (wfrouter._await); its first value as text (a command: its status)
CREATE FUNCTION wfrouter._on(conn text, shard text, sql text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v text;
BEGIN
    PERFORM wfrouter._send(conn, shard, sql);
    SELECT x.v INTO v FROM public.dblink_get_result(conn) AS x(v text);
    -- (the end of the answers: the connection takes a statement again)
    PERFORM 1 FROM public.dblink_get_result(conn, false) AS x(v text);
    RETURN v;
END
$$;

-- opens connection conn of this session to shard (closed first if open)
-- and sends it sql, waiting for the answer as wfrouter._await does; the
-- caller reads the answer with dblink_get_result(conn) (in a row type of
-- its own), then closes conn (wfrouter._poll_close)
CREATE FUNCTION wfrouter._poll_send(conn text, shard text, sql text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM wfrouter._poll_close(conn);
    PERFORM public.dblink_connect(conn, wfrouter._connstr(shard));
    PERFORM wfrouter._send(conn, shard, sql);
END
$$;

-- one statement on the database of connection string connstr (shard
-- names it in errors), on a connection of its own; its first value as text
CREATE FUNCTION wfrouter._remote_at(connstr text, shard text, sql text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    conn text := 'wfrouter_remote';
    v text;
BEGIN
    PERFORM wfrouter._poll_close(conn);
    PERFORM public.dblink_connect(conn, connstr);
    -- (closed on every way out, a cancellation too: wfrouter._learn_map
    -- runs this in the sessions of the tenants, who may run dblink on a
    -- named connection left open)
    BEGIN
        v := wfrouter._on(conn, shard, sql);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM wfrouter._poll_close(conn);
        RAISE;
    END;
    PERFORM public.dblink_disconnect(conn);
    RETURN v;
END
$$;

-- one statement on a shard, on a connection of its own (a transaction of
-- its own); its first value as text
CREATE OR REPLACE FUNCTION wfrouter._remote(shard text, sql text)
RETURNS text
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
SELECT wfrouter._remote_at(wfrouter._connstr(shard), shard, sql)
$$;

-- a command that cannot run in a transaction block (CREATE SUBSCRIPTION);
-- its status
CREATE OR REPLACE FUNCTION wfrouter._remote_exec(shard text, sql text)
RETURNS text
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
SELECT wfrouter._remote(shard, sql)
$$;

REVOKE ALL ON FUNCTION wfrouter._shard_timeout(), wfrouter._connect_timeout(), wfrouter._connstr_of(text),
    wfrouter._answered_by(text, timestamptz), wfrouter._alive(text, interval), wfrouter._await(text, text),
    wfrouter._send(text, text, text), wfrouter._on(text, text, text), wfrouter._remote_at(text, text, text),
    wfrouter._poll_send(text, text, text), wfrouter._poll_close(text) FROM PUBLIC;

-- the two functions of 0.1.0 that asked a shard with dblink(connstr, sql)
-- directly, now through wfrouter._remote and wfrouter._remote_at (a router
-- session learning a newer map from a shard that refused its call, and
-- wfrouter.add_shard asking the new database what it is): the rest as
-- 0.1.0 wrote them
CREATE OR REPLACE FUNCTION wfrouter._learn_map(shard text)
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
    SELECT x.v, x.m INTO v, m
    FROM pg_catalog.jsonb_to_record(wfrouter._remote(shard,
        'SELECT pg_catalog.json_build_object(''v'', s.map_version, ''m'', (SELECT pg_catalog.array_agg(p.shard ORDER BY p.partition) FROM wfshard.partitions p)) FROM wfshard.self s')::jsonb)
        AS x(v bigint, m text[]);
    RETURN wfrouter._apply_map(m, v);
END
$$;

CREATE OR REPLACE FUNCTION wfrouter.add_shard(name text, connstr text)
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
    SELECT * INTO known FROM pg_catalog.jsonb_to_record(wfrouter._remote_at(wfrouter._connstr_of(connstr), name,
        'SELECT pg_catalog.json_build_object(''shard'', (SELECT s.shard FROM wfshard.self s), ''block'', wf._id_block())')::jsonb)
        AS x(shard text, block integer);
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

-- the connection of this session to shard for a move's cut-over (its
-- name; opened unless open already).  It is opened before the window in
-- which the partition is refused: a connection per statement cost a
-- backend start each inside it.  wfrouter._move_unlock closes it.
CREATE FUNCTION wfrouter._cut_conn(shard text)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    conn text := 'wfrouter_move_cut:' OPERATOR(pg_catalog.||) shard;
BEGIN
    IF conn OPERATOR(pg_catalog.=) ANY (COALESCE(public.dblink_get_connections(), '{}')) THEN
        BEGIN
            PERFORM wfrouter._on(conn, shard, 'SELECT 1');
            RETURN conn;
        EXCEPTION WHEN OTHERS THEN
            -- (the shard restarted since: a new connection)
            PERFORM wfrouter._poll_close(conn);
        END;
    END IF;
    PERFORM public.dblink_connect(conn, wfrouter._connstr(shard));
    RETURN conn;
END
$$;

REVOKE ALL ON FUNCTION wfrouter._cut_conn(text) FROM PUBLIC;

-- ==== move locks: one move at a time per shard, through any router (issue 30) ====
-- Every router has its own wfrouter.moves, so "one move at a time" there
-- did not stop two routers moving one partition at once; the loser's
-- wfrouter.cancel_move could then give the partition back to the source
-- while another shard owned it (TAP 129_move_race).  A move or a
-- cancellation now holds, for all its length, a session advisory lock
-- (keys 2003202930, 0) on its source and its target, taken through dblink
-- connections of its own ("wfrouter_move_lock:<shard>", application_name
-- naming the move).  The locks go with the router session or the shard.

-- ends this session's move locks and cut-over connections (closes them);
-- returns how many
CREATE FUNCTION wfrouter._move_unlock()
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c text;
    n integer := 0;
BEGIN
    FOR c IN SELECT x FROM pg_catalog.unnest(public.dblink_get_connections()) x
             WHERE x OPERATOR(pg_catalog.~~) 'wfrouter\_move\_lock:%' OR x OPERATOR(pg_catalog.~~) 'wfrouter\_move\_cut:%' LOOP
        BEGIN
            PERFORM public.dblink_disconnect(c);
        EXCEPTION WHEN OTHERS THEN
            NULL;                   -- its shard went away: so did the lock
        END;
        n := n OPERATOR(pg_catalog.+) 1;
    END LOOP;
    RETURN n;
END
$$;

-- takes the move lock of every shard of shards (in name order, none
-- waited for) for a move or cancellation (what) of partition p; refuses
-- with 55006 naming the holder when one is taken
CREATE FUNCTION wfrouter._move_lock(p integer, shards text[], what text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s text;
    conn text;
    holder text;
BEGIN
    PERFORM wfrouter._move_unlock();
    FOR s IN SELECT DISTINCT x FROM pg_catalog.unnest(shards) x ORDER BY x LOOP
        conn := 'wfrouter_move_lock:' OPERATOR(pg_catalog.||) s;
        PERFORM public.dblink_connect(conn, wfrouter._connstr(s) OPERATOR(pg_catalog.||) ' application_name='
            OPERATOR(pg_catalog.||) pg_catalog.quote_literal(pg_catalog.format('wfrouter %s, %s pid %s',
                what, pg_catalog.current_database(), pg_catalog.pg_backend_pid())));
        IF NOT wfrouter._on(conn, s, 'SELECT pg_catalog.pg_try_advisory_lock(2003202930, 0)')::boolean THEN
            holder := wfrouter._on(conn, s,
                'SELECT pg_catalog.string_agg(pg_catalog.format(''%s (pid %s)'', a.application_name, a.pid), '', '') '
                'FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid '
                'WHERE l.locktype OPERATOR(pg_catalog.=) ''advisory'' AND l.granted AND l.classid OPERATOR(pg_catalog.=) 2003202930 '
                'AND l.objid OPERATOR(pg_catalog.=) 0 AND l.objsubid OPERATOR(pg_catalog.=) 2 '
                'AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())');
            PERFORM wfrouter._move_unlock();
            RAISE EXCEPTION 'partition % cannot be moved now: shard "%" is in another move', p, s
                USING ERRCODE = 'object_in_use',
                      DETAIL = 'Held by ' OPERATOR(pg_catalog.||) COALESCE(holder, 'a session that has just ended') OPERATOR(pg_catalog.||) '.',
                      HINT = 'One move at a time per shard, whichever router makes it: wait for that move to end (wfrouter.moves on its router), then see where the partition is.';
        END IF;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION wfrouter._move_unlock(), wfrouter._move_lock(integer, text[], text) FROM PUBLIC;

-- ==== the copy of a move (issue 30) ====

-- makes the publication of partition p on from_shard, and the target's
-- subscription to it on to_shard (the target's rows of p an earlier copy
-- left go first, wf.move_in_begin), unless they exist already
CREATE FUNCTION wfrouter._copy_begin(p integer, from_shard text, to_shard text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    sub text := 'wf_move_' OPERATOR(pg_catalog.||) p;
BEGIN
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
END
$$;

-- drops what the copy of partition p from from_shard to to_shard made:
-- the subscription on to_shard (a CREATE SUBSCRIPTION of a router session
-- that died ends first), the target's rows of p, and on from_shard the
-- subscription's slots (its own, its table synchronisations') and the
-- publication.  A subscription whose slot is gone from the source, which
-- DROP SUBSCRIPTION cannot drop, is dropped without it.  The target must
-- not own p (wf.drop_partition refuses).
CREATE FUNCTION wfrouter._copy_drop(p integer, from_shard text, to_shard text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    sub text := 'wf_move_' OPERATOR(pg_catalog.||) p;
    suboid text;
    left_over text;
BEGIN
    PERFORM wfrouter._remote(to_shard, pg_catalog.format(
        'SELECT pg_catalog.count(pg_catalog.pg_terminate_backend(a.pid, 10000))::text FROM pg_catalog.pg_stat_activity a '
        'WHERE a.query LIKE %L AND a.pid <> pg_catalog.pg_backend_pid()', 'CREATE SUBSCRIPTION ' OPERATOR(pg_catalog.||) sub OPERATOR(pg_catalog.||) ' %'));
    suboid := wfrouter._remote(to_shard, pg_catalog.format(
        'SELECT s.oid::text FROM pg_catalog.pg_subscription s WHERE s.subname = %L '
        'AND s.subdbid = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())', sub));
    IF suboid IS NOT NULL THEN
        BEGIN
            PERFORM wfrouter._remote_exec(to_shard, pg_catalog.format('DROP SUBSCRIPTION IF EXISTS %I', sub));
        EXCEPTION WHEN OTHERS THEN
            -- its slot is gone from the source (DROP SUBSCRIPTION fails
            -- then): the subscription goes without it; any other failure
            -- (the source cannot be reached: the slot may be there) stays
            IF wfrouter._remote(from_shard, pg_catalog.format(
                   'SELECT pg_catalog.count(*) FROM pg_catalog.pg_replication_slots WHERE slot_name = %L', sub)) OPERATOR(pg_catalog.<>) '0' THEN
                RAISE;
            END IF;
            PERFORM wfrouter._remote_exec(to_shard, pg_catalog.format('ALTER SUBSCRIPTION %I DISABLE', sub));
            PERFORM wfrouter._remote_exec(to_shard, pg_catalog.format('ALTER SUBSCRIPTION %I SET (slot_name = NONE)', sub));
            PERFORM wfrouter._remote_exec(to_shard, pg_catalog.format('DROP SUBSCRIPTION IF EXISTS %I', sub));
        END;
    END IF;
    PERFORM wfrouter._remote(to_shard, pg_catalog.format('SELECT wf.drop_partition(%s)::text', p));
    -- the slots of the subscription left on the source (their walsenders
    -- end first; a worker of the dropped subscription may hold one still)
    FOR i IN 1..20 LOOP
        BEGIN
            left_over := wfrouter._remote(from_shard, pg_catalog.format(
                'SELECT pg_catalog.string_agg(s.slot_name::text || '':'' || '
                '  CASE WHEN s.active_pid IS NULL THEN pg_catalog.pg_drop_replication_slot(s.slot_name)::text '
                '  ELSE pg_catalog.pg_terminate_backend(s.active_pid, 5000)::text END, '','') '
                'FROM pg_catalog.pg_replication_slots s '
                'WHERE s.database = pg_catalog.current_database() '
                'AND (s.slot_name = %L OR s.slot_name LIKE %L)',
                sub, 'pg\_' OPERATOR(pg_catalog.||) COALESCE(suboid, '-') OPERATOR(pg_catalog.||) '\_sync\_%'));
        EXCEPTION WHEN undefined_object OR object_in_use THEN
            -- (a slot dropped, or taken, meanwhile: looked at again)
            left_over := 'again';
        END;
        EXIT WHEN left_over IS NULL;
        PERFORM pg_catalog.pg_sleep(0.1);
    END LOOP;
    PERFORM wfrouter._remote_exec(from_shard, pg_catalog.format('DROP PUBLICATION IF EXISTS %I', sub));
END
$$;

REVOKE ALL ON FUNCTION wfrouter._copy_begin(integer, text, text), wfrouter._copy_drop(integer, text, text) FROM PUBLIC;

-- waits until the subscription of the move (id) of partition p on to_shard
-- has copied every table (all 'ready'), noting the progress in
-- wfrouter.moves; returns the source's lag in bytes then.  Each poll goes
-- through wfrouter._poll_send.  Stops with an error that names the
-- partition, the shard and what failed, noted in wfrouter.moves too, when:
-- the copy has not ended after copy_wait (55000); the target or the source
-- cannot be reached for wait (08006); the subscription is gone or disabled
-- (55000), has had no apply worker for wait (55000), or its workers keep
-- failing (errors counted in pg_stat_subscription_stats for wait, no table
-- copied meanwhile: 55000).  This wait used to have no end.
-- A slot the copy needs (the subscription's, or that of a table whose
-- synchronisation has copied it) gone from the source for wait makes the
-- copy fail for ever, uncounted in pg_stat_subscription_stats (TAP
-- 126_grow, the source crashing during the copy): the copy restarts from
-- scratch (wfrouter._copy_drop, wfrouter._copy_begin; the partition is
-- live on the source all along), noted "the copy was restarted <n>
-- time(s): <why>"; at the fourth time the move ends as 'failed' with
-- nothing of it left (55000), and run again starts afresh.
CREATE FUNCTION wfrouter._wait_copy(id bigint, p integer, from_shard text, to_shard text, wait interval, copy_wait interval)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    sub text := 'wf_move_' OPERATOR(pg_catalog.||) p;
    t0 timestamptz := pg_catalog.clock_timestamp();
    hint text := pg_catalog.format('The move stays under way and partition %s stays on shard "%s": run wfrouter.move_partition(%s, %L) again to go on '
        'from where the copy is (the target goes on copying meanwhile), or undo the move with wfrouter.cancel_move(%s).',
        p, from_shard, p, to_shard, p);
    st record;
    lag bigint;
    tick timestamptz;
    asking text;              -- the shard being asked
    down_since timestamptz;   -- since when a shard cannot be reached
    msg text;
    det text;
    copied integer := -1;     -- tables copied at the last poll
    errors bigint;            -- the workers' errors counted at the last poll
    failing_since timestamptz;  -- the first of them since a table was last copied
    idle_since timestamptz;   -- since when no apply worker runs
    src record;
    gone_since timestamptz;   -- since when a slot the copy needs is gone
    restarts integer := 0;
    restarted text;           -- the note of the last restart
    why text;
    poll text := 'wfrouter_move_poll';  -- the connection of a poll
BEGIN
    LOOP
        tick := pg_catalog.clock_timestamp();
        BEGIN
            asking := to_shard;
            PERFORM wfrouter._poll_send(poll, to_shard, pg_catalog.format(
                'SELECT s.oid IS NOT NULL, s.subenabled, '
                '  EXISTS (SELECT 1 FROM pg_catalog.pg_stat_subscription w WHERE w.subid = s.oid AND w.relid IS NULL AND w.pid IS NOT NULL), '
                '  (SELECT pg_catalog.count(*) FROM pg_catalog.pg_subscription_rel r WHERE r.srsubid = s.oid)::integer, '
                '  (SELECT pg_catalog.count(*) FROM pg_catalog.pg_subscription_rel r WHERE r.srsubid = s.oid AND r.srsubstate = ''r'')::integer, '
                '  (SELECT pg_catalog.string_agg(pg_catalog.format(''%%s (%%s)'', r.srrelid::regclass, CASE r.srsubstate WHEN ''i'' THEN ''not started'' '
                '          WHEN ''d'' THEN ''copying'' WHEN ''f'' THEN ''copied'' WHEN ''s'' THEN ''catching up'' ELSE r.srsubstate::text END), '', '' '
                '          ORDER BY r.srrelid::regclass::text) '
                '   FROM pg_catalog.pg_subscription_rel r WHERE r.srsubid = s.oid AND r.srsubstate <> ''r''), '
                '  COALESCE((SELECT x.sync_error_count + x.apply_error_count FROM pg_catalog.pg_stat_subscription_stats x WHERE x.subid = s.oid), 0), '
                '  (SELECT COALESCE(pg_catalog.sum(c.tuples_processed), 0)::bigint FROM pg_catalog.pg_stat_progress_copy c '
                '   WHERE c.datname = pg_catalog.current_database()), '
                '  ARRAY(SELECT pg_catalog.format(''pg_%%s_sync_%%s_%%s'', s.oid, r.srrelid, (pg_catalog.pg_control_system()).system_identifier) '
                '        FROM pg_catalog.pg_subscription_rel r WHERE r.srsubid = s.oid AND r.srsubstate = ''f'' ORDER BY r.srrelid), '
                '  ARRAY(SELECT r.srrelid::regclass::text FROM pg_catalog.pg_subscription_rel r '
                '        WHERE r.srsubid = s.oid AND r.srsubstate = ''f'' ORDER BY r.srrelid) '
                'FROM (SELECT 1) one LEFT JOIN pg_catalog.pg_subscription s ON s.subname = %L '
                'AND s.subdbid = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())', sub));
            SELECT * INTO st FROM public.dblink_get_result(poll)
                AS x(found boolean, enabled boolean, applying boolean, tables_total integer, tables_copied integer,
                     pending text, errors bigint, rows_copying bigint, sync_slots text[], sync_tables text[]);
            asking := from_shard;
            -- the lag, and which of the slots the copy needs (the
            -- subscription's, its copied tables') the source has not
            PERFORM wfrouter._poll_send(poll, from_shard, pg_catalog.format(
                'SELECT (SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint '
                '        FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = %L), '
                '  ARRAY(SELECT x FROM pg_catalog.unnest(%L::text[]) WITH ORDINALITY AS u(x, i) '
                '        WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = u.x) ORDER BY u.i)',
                sub, ARRAY[sub] OPERATOR(pg_catalog.||) COALESCE(st.sync_slots, '{}')));
            SELECT * INTO src FROM public.dblink_get_result(poll) AS x(lag bigint, gone text[]);
            PERFORM wfrouter._poll_close(poll);
            lag := src.lag;
            down_since := NULL;
        EXCEPTION WHEN connection_exception OR SQLSTATE '57P01' OR SQLSTATE '57P02' OR SQLSTATE '57P03' THEN
            -- (dblink: 08001 for a connection refused or timed out; the
            -- shard's own SQLSTATE for a server that went away mid-query;
            -- wfrouter._poll_send: 08006 for no answer within 10 s)
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
            PERFORM wfrouter._poll_close(poll);
            down_since := COALESCE(down_since, tick);
            PERFORM wfrouter._note(id, 'copying', pg_catalog.jsonb_build_object('note', pg_catalog.format(
                'shard "%s" cannot be reached since %s: %s', asking, down_since, COALESCE(NULLIF(det, ''), msg))));
            -- (now, not when the poll began: a connection attempt may
            -- take connect_timeout)
            IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) (down_since OPERATOR(pg_catalog.+) wait)
               OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>=) (t0 OPERATOR(pg_catalog.+) copy_wait) THEN
                RAISE EXCEPTION 'cannot copy partition % to shard "%": shard "%" cannot be reached', p, to_shard, asking
                    USING ERRCODE = 'connection_failure',
                          DETAIL = pg_catalog.format('Not for %s s: %s', pg_catalog.round(EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) down_since)::numeric, 1),
                              COALESCE(NULLIF(det, ''), msg)),
                          HINT = hint;
            END IF;
            PERFORM pg_catalog.pg_sleep(0.5);
            CONTINUE;
        WHEN OTHERS OR query_canceled THEN
            -- (an error of the shard's own, a cancellation: no connection
            -- of the poll is left open)
            PERFORM wfrouter._poll_close(poll);
            RAISE;
        END;
        PERFORM wfrouter._note(id, 'copying', pg_catalog.jsonb_build_object('tables_total', st.tables_total,
            'tables_copied', st.tables_copied, 'rows_copied', st.rows_copying, 'lag_bytes', lag, 'note', restarted));
        IF NOT st.found OR NOT st.enabled THEN
            msg := pg_catalog.format('the subscription "%s" on shard "%s" %s', sub, to_shard,
                CASE WHEN st.found THEN 'is disabled' ELSE 'does not exist' END);
            PERFORM wfrouter._note(id, 'copying', pg_catalog.jsonb_build_object('note', msg));
            RAISE EXCEPTION 'cannot copy partition % to shard "%": %', p, to_shard, msg
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = hint;
        END IF;
        EXIT WHEN st.tables_total OPERATOR(pg_catalog.>) 0 AND st.tables_copied OPERATOR(pg_catalog.=) st.tables_total;
        -- a slot the copy needs gone from the source (a table's
        -- synchronisation that has copied its table goes on from its own
        -- slot; the subscription streams from wf_move_<p>): what needs it
        -- fails for ever.  (A synchronisation drops its slot just before
        -- it commits its end: gone for wait, not for a moment.)  The copy
        -- starts again from scratch, at most 3 times in a call
        IF pg_catalog.cardinality(src.gone) OPERATOR(pg_catalog.=) 0 THEN
            gone_since := NULL;
        ELSE
            gone_since := COALESCE(gone_since, tick);
            IF tick OPERATOR(pg_catalog.>=) (gone_since OPERATOR(pg_catalog.+) wait) THEN
                IF src.gone[1] OPERATOR(pg_catalog.=) sub THEN
                    why := pg_catalog.format('the replication slot "%s" of subscription "%s" on shard "%s" is gone from shard "%s"',
                        sub, sub, to_shard, from_shard);
                ELSE
                    why := pg_catalog.format('the synchronisation of table %s (copied) on shard "%s" cannot go on: its replication slot "%s" is gone from shard "%s"',
                        st.sync_tables[pg_catalog.array_position(st.sync_slots, src.gone[1])], to_shard, src.gone[1], from_shard);
                END IF;
                restarts := restarts OPERATOR(pg_catalog.+) 1;
                IF restarts OPERATOR(pg_catalog.>) 3 THEN
                    -- nothing of the move is left: run again, it starts afresh
                    PERFORM wfrouter._copy_drop(p, from_shard, to_shard);
                    msg := pg_catalog.format('the copy was restarted 3 times and failed again (%s); nothing of the move is left', why);
                    PERFORM wfrouter._note(id, 'failed', pg_catalog.jsonb_build_object('note', msg));
                    RAISE EXCEPTION 'cannot copy partition % from shard "%" to shard "%": its copy was restarted 3 times and cannot go on', p, from_shard, to_shard
                        USING ERRCODE = 'object_not_in_prerequisite_state',
                              DETAIL = pg_catalog.upper(pg_catalog.left(why, 1)) OPERATOR(pg_catalog.||) pg_catalog.substr(why, 2)
                                  OPERATOR(pg_catalog.||) '. Not copied yet: ' OPERATOR(pg_catalog.||) COALESCE(st.pending, 'none') OPERATOR(pg_catalog.||) '.',
                              HINT = pg_catalog.format('The move has ended (failed in wfrouter.moves), and partition %s stays on shard "%s": nothing of the move is left on the shards. '
                                  'Look at the server logs of shards "%s" and "%s" (a shard that restarts again and again, replication slots dropped by hand), '
                                  'then run wfrouter.move_partition(%s, %L) again: it starts afresh.', p, from_shard, from_shard, to_shard, p, to_shard);
                END IF;
                restarted := pg_catalog.format('the copy was restarted %s time%s: %s', restarts,
                    CASE WHEN restarts OPERATOR(pg_catalog.=) 1 THEN '' ELSE 's' END, why);
                PERFORM wfrouter._note(id, 'copying', pg_catalog.jsonb_build_object('note', restarted,
                    'tables_copied', 0, 'rows_copied', 0));
                PERFORM wfrouter._copy_drop(p, from_shard, to_shard);
                PERFORM wfrouter._copy_begin(p, from_shard, to_shard);
                gone_since := NULL;
                copied := -1;
                errors := NULL;
                failing_since := NULL;
                idle_since := NULL;
                CONTINUE;
            END IF;
        END IF;
        -- a table copied: what failed before did not stay failed
        IF st.tables_copied OPERATOR(pg_catalog.>) copied THEN
            copied := st.tables_copied;
            failing_since := NULL;
        END IF;
        -- errors counted again: the copy fails, and goes on failing
        -- (the counts start again from 0 after the target's crash)
        IF errors IS NOT NULL AND st.errors OPERATOR(pg_catalog.>) errors THEN
            failing_since := COALESCE(failing_since, tick);
            IF tick OPERATOR(pg_catalog.>=) (failing_since OPERATOR(pg_catalog.+) wait) THEN
                msg := pg_catalog.format('its copy keeps failing on shard "%s"', to_shard);
                PERFORM wfrouter._note(id, 'copying', pg_catalog.jsonb_build_object('note', msg));
                RAISE EXCEPTION 'cannot copy partition % to shard "%": %', p, to_shard, msg
                    USING ERRCODE = 'object_not_in_prerequisite_state',
                          DETAIL = pg_catalog.format('The workers of subscription "%s" have failed again and again for %s s (%s errors in all, '
                              'pg_stat_subscription_stats), and no table was copied meanwhile. Not copied yet: %s.',
                              sub, pg_catalog.round(EXTRACT(epoch FROM tick OPERATOR(pg_catalog.-) failing_since)::numeric, 1), st.errors, st.pending),
                          HINT = pg_catalog.format('The errors are in the server log of shard "%s". ', to_shard) OPERATOR(pg_catalog.||) hint;
            END IF;
        END IF;
        errors := st.errors;
        -- no apply worker (it starts the table synchronisations): one that
        -- failed is started again within wal_retrieve_retry_interval
        IF st.applying THEN
            idle_since := NULL;
        ELSE
            idle_since := COALESCE(idle_since, tick);
            IF tick OPERATOR(pg_catalog.>=) (idle_since OPERATOR(pg_catalog.+) wait) THEN
                msg := pg_catalog.format('no worker of subscription "%s" has run on shard "%s" for %s s', sub, to_shard,
                    pg_catalog.round(EXTRACT(epoch FROM tick OPERATOR(pg_catalog.-) idle_since)::numeric, 1));
                PERFORM wfrouter._note(id, 'copying', pg_catalog.jsonb_build_object('note', msg));
                RAISE EXCEPTION 'cannot copy partition % to shard "%": %', p, to_shard, msg
                    USING ERRCODE = 'object_not_in_prerequisite_state',
                          DETAIL = pg_catalog.format('Not copied yet: %s.', st.pending),
                          HINT = pg_catalog.format('See the server log of shard "%s" (max_logical_replication_workers, max_worker_processes). ', to_shard)
                              OPERATOR(pg_catalog.||) hint;
            END IF;
        END IF;
        IF tick OPERATOR(pg_catalog.>=) (t0 OPERATOR(pg_catalog.+) copy_wait) THEN
            msg := pg_catalog.format('the copy did not end in %s', copy_wait);
            PERFORM wfrouter._note(id, 'copying', pg_catalog.jsonb_build_object('note', msg));
            RAISE EXCEPTION 'cannot copy partition % to shard "%": %', p, to_shard, msg
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = pg_catalog.format('%s of %s tables copied, %s rows in the copies under way; not copied yet: %s.',
                          st.tables_copied, st.tables_total, st.rows_copying, st.pending),
                      HINT = 'A larger partition needs a larger copy_wait (wfrouter.move_partition(p, to_shard, wait, copy_wait)). ' OPERATOR(pg_catalog.||) hint;
        END IF;
        PERFORM pg_catalog.pg_sleep(0.1);
    END LOOP;
    RETURN lag;
END
$$;

REVOKE ALL ON FUNCTION wfrouter._wait_copy(bigint, integer, text, text, interval, interval) FROM PUBLIC;

-- ==== a cut-over left waiting on the target (issue 30) ====
-- The target's part of a cut-over (wf.move_in_cutover, one transaction)
-- can wait there for a lock long after the router session that sent it
-- died, and then commit: with a move run again or a cancellation
-- meanwhile, two shards owned the partition (TAP 128_move_crash).  A move,
-- a cancellation and a failed cut-over now end it (and wait until it is
-- gone) before they look at who owns the partition.

-- ends every backend on shard that runs the cut-over of partition p
-- (wf.move_in_cutover, as wfrouter._move_partition sends it), and waits
-- until each is gone; returns how many
CREATE FUNCTION wfrouter._end_cutover(shard text, p integer)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ended text;
BEGIN
    ended := wfrouter._remote(shard, pg_catalog.format(
        'SELECT pg_catalog.count(*) || '' '' || pg_catalog.count(*) FILTER (WHERE NOT pg_catalog.pg_terminate_backend(a.pid, 10000)) '
        'FROM pg_catalog.pg_stat_activity a '
        'WHERE a.query LIKE %L AND a.pid <> pg_catalog.pg_backend_pid()',
        'SELECT wf.move\_in\_cutover(' OPERATOR(pg_catalog.||) p OPERATOR(pg_catalog.||) ',%'));
    IF pg_catalog.split_part(ended, ' ', 2) OPERATOR(pg_catalog.<>) '0' THEN
        RAISE EXCEPTION 'the cut-over of partition % on shard "%" did not end in 10 s', p, shard
            USING ERRCODE = 'object_in_use',
                  HINT = 'Look at pg_stat_activity on that shard, and run the move again.';
    END IF;
    RETURN pg_catalog.split_part(ended, ' ', 1)::integer;
END
$$;

REVOKE ALL ON FUNCTION wfrouter._end_cutover(text, integer) FROM PUBLIC;

-- ==== moving a partition (issue 30) ====

-- 0.1.0's wfrouter.move_partition(p, to_shard, wait): 0.2.0's has
-- copy_wait too, and its body is wfrouter._move_partition
DROP FUNCTION wfrouter.move_partition(integer, text, interval);

-- the move itself (copy, catch-up, cut-over, clean-up), run by
-- wfrouter.move_partition with the move locks of its source and target
-- held.  Its cut-over goes through the connections of wfrouter._cut_conn;
-- the note of the cut-over tells where its dark window went, and keeps the
-- note of a restart of the copy.
CREATE FUNCTION wfrouter._move_partition(p integer, to_shard text, wait interval, copy_wait interval)
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
    verified timestamptz;
    t0 timestamptz;
    deadline timestamptz;
    lag bigint;
    version bigint;
    runs integer;
    s text;
    reached text;
    src_conn text;
    dst_conn text;
    t1 timestamptz;           -- the source gave the partition away
    t2 timestamptz;           -- the target reached its WAL position
    polls integer := 0;
    restarted text;           -- the note of a restart of the copy
    msg text;                 -- the error of a cut-over
    owner text;               -- who owns the partition, says the target
BEGIN
    PERFORM wfrouter._superuser('move_partition');
    IF wait IS NULL OR wait OPERATOR(pg_catalog.<=) interval '0' OR copy_wait IS NULL OR copy_wait OPERATOR(pg_catalog.<=) interval '0' THEN
        RAISE EXCEPTION 'wait and copy_wait of a move must be positive intervals, not % and %', wait, copy_wait
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
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

    -- a cut-over of a router session that died may still wait on the
    -- target, and commit later: it ends before the owners are looked at
    PERFORM wfrouter._end_cutover(to_shard, p);
    IF wfrouter._remote_owner(to_shard, p) IS DISTINCT FROM to_shard THEN
        IF wfrouter._remote_owner(from_shard, p) OPERATOR(pg_catalog.=) from_shard THEN
            -- 1. the copy, while the partition stays live on the source
            PERFORM wfrouter._copy_begin(p, from_shard, to_shard);
            -- every table copied, or an error that says why not (issue 30:
            -- this wait had no end); a copy that cannot go on is started
            -- again, and the note says so: it is kept in the cut-over's
            lag := wfrouter._wait_copy(id, p, from_shard, to_shard, wait, copy_wait);
            restarted := (SELECT m.note FROM wfrouter.moves m WHERE m.move_id OPERATOR(pg_catalog.=) id
                          AND m.note OPERATOR(pg_catalog.~~) 'the copy was restarted %');
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
        -- to the target's commit.  Its statements go through a connection
        -- to each shard opened before (a new one per statement cost a
        -- backend start each in the dark window, tens of ms on a loaded
        -- machine, for the lock, every poll of the WAL position and the
        -- target's commit); wfrouter._move_unlock closes them
        src_conn := wfrouter._cut_conn(from_shard);
        dst_conn := wfrouter._cut_conn(to_shard);
        deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) wait;
        -- (every statement waits at most wfrouter.shard_timeout: a source
        -- that stops answering here may give the partition away when it
        -- answers again, and the move run again then finishes it)
        BEGIN
            LOOP
                PERFORM wfrouter._note(id, 'cutting over');
                t0 := pg_catalog.clock_timestamp();
                st := wfrouter._on(src_conn, from_shard,
                    pg_catalog.format('SELECT wf.move_out_cutover(%s, %L, 500)', p, to_shard))::jsonb;
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
            t1 := pg_catalog.clock_timestamp();
            LOOP
                polls := polls OPERATOR(pg_catalog.+) 1;
                EXIT WHEN wfrouter._on(src_conn, from_shard, pg_catalog.format(
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
        EXCEPTION WHEN connection_exception THEN
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
            PERFORM wfrouter._note(id, 'cutting over', pg_catalog.jsonb_build_object('note', 'the source does not answer: ' OPERATOR(pg_catalog.||) msg));
            RAISE EXCEPTION 'cannot cut partition % over to shard "%": shard "%" does not answer', p, to_shard, from_shard
                USING ERRCODE = 'connection_failure',
                      DETAIL = pg_catalog.format('Whether shard "%s" gave the partition away is known only once it answers; until then it may refuse the partition. %s',
                          from_shard, msg),
                      HINT = pg_catalog.format('Run wfrouter.move_partition(%s, %L) again once shard "%s" answers: it finishes the move, or wfrouter.cancel_move(%s) if the source still owns the partition.',
                          p, to_shard, from_shard, p);
        END;
        t2 := pg_catalog.clock_timestamp();
        BEGIN
            PERFORM wfrouter._on(dst_conn, to_shard, pg_catalog.format('SELECT wf.move_in_cutover(%s, %L::jsonb, %L)', p, st, verified));
        EXCEPTION WHEN OTHERS THEN
            -- the source takes it back: it has every row; unless the
            -- target took it (its cut-over may have gone on after the
            -- error reached this session: it ends first).  A target that
            -- does not answer may still take it: the partition stays
            -- refused by both until it answers (two owners are worse)
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
            BEGIN
                PERFORM wfrouter._end_cutover(to_shard, p);
                owner := wfrouter._remote_owner(to_shard, p);
            EXCEPTION WHEN connection_exception THEN
                PERFORM wfrouter._note(id, 'cutting over', pg_catalog.jsonb_build_object('note', 'the target does not answer: ' OPERATOR(pg_catalog.||) msg));
                RAISE EXCEPTION 'cannot cut partition % over to shard "%": shard "%" does not answer', p, to_shard, to_shard
                    USING ERRCODE = 'connection_failure',
                          DETAIL = pg_catalog.format('Shard "%s" gave the partition away; whether shard "%s" took it is known only once it answers, and until then both refuse the partition. %s',
                              from_shard, to_shard, msg),
                          HINT = pg_catalog.format('Run wfrouter.move_partition(%s, %L) again once shard "%s" answers: it finishes the move.', p, to_shard, to_shard);
            END;
            IF owner IS DISTINCT FROM to_shard THEN
                PERFORM wfrouter._give_back(from_shard, p, (st OPERATOR(pg_catalog.->>) 'map_version')::bigint);
            END IF;
            PERFORM wfrouter._note(id, 'catching up', pg_catalog.jsonb_build_object('note', 'cut-over failed: ' OPERATOR(pg_catalog.||) msg));
            RAISE;
        END;
        -- where the dark window went, in the note
        PERFORM wfrouter._note(id, 'cleaning up', pg_catalog.jsonb_build_object('dark_ms',
            EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) t0) OPERATOR(pg_catalog.*) 1000,
            'note', pg_catalog.format('cut-over: the source gave the partition away in %s ms, the target reached its WAL position in %s ms (%s polls), took the partition in %s ms',
                pg_catalog.round(EXTRACT(epoch FROM t1 OPERATOR(pg_catalog.-) t0)::numeric OPERATOR(pg_catalog.*) 1000),
                pg_catalog.round(EXTRACT(epoch FROM t2 OPERATOR(pg_catalog.-) t1)::numeric OPERATOR(pg_catalog.*) 1000), polls,
                pg_catalog.round(EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) t2)::numeric OPERATOR(pg_catalog.*) 1000))
                OPERATOR(pg_catalog.||) COALESCE('; ' OPERATOR(pg_catalog.||) restarted, '')));
    END IF;

    -- 3. the router's map, at once for every session; then what is left
    version := wfrouter._remote(to_shard, 'SELECT s.map_version FROM wfshard.self s')::bigint;
    PERFORM wfrouter._loopback(pg_catalog.format('SELECT wfrouter._apply_map(%L, %s)::text', wfrouter._map_with(p, to_shard), version));
    PERFORM wfrouter._note(id, 'cleaning up');
    PERFORM wfrouter._remote_exec(to_shard, pg_catalog.format('DROP SUBSCRIPTION IF EXISTS %I', sub));
    -- the list of the runs the copy wrote, which the cut-over verified:
    -- emptied here, not in the cut-over (a TRUNCATE there waited for an
    -- autovacuum of the list, deadlock_timeout, in the dark window); a
    -- table held for 2 s (a pg_dump) is left to the next move's start
    PERFORM wfrouter._remote(to_shard, 'DO $t$ BEGIN SET LOCAL lock_timeout = ''2s''; TRUNCATE wfshard.moved_runs; '
        'EXCEPTION WHEN lock_not_available THEN NULL; END $t$');
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

COMMENT ON FUNCTION wfrouter._move_partition(integer, text, interval, interval) IS
'Internal: the move of partition p to to_shard (copy, cut-over, clean-up), run by wfrouter.move_partition with the move locks of its source and target held.';
REVOKE ALL ON FUNCTION wfrouter._move_partition(integer, text, interval, interval) FROM PUBLIC;

-- takes the move locks of the partition's source and target, then runs
-- wfrouter._move_partition.  Before that it checks the partition is where
-- this router's map says: if that shard gave it to a shard that took it
-- (a move made through another router), this router learns that shard's
-- map and moves from there; if it gave it to a shard that has not taken
-- it (another router's move, unfinished), the move is refused (55006).
-- A partition the shards show on the target already, with no move of it
-- under way here, is done (a move that finished by itself, or through
-- another router): shards that missed the move's map get it, and it
-- returns 0 with a NOTICE saying why, instead of 55000 "is on shard ...
-- already", so that a caller that runs a move again after any failure can
-- tell a move done from a move refused (TAP 126_grow).
CREATE FUNCTION wfrouter.move_partition(p integer, to_shard text, wait interval DEFAULT '30 seconds', copy_wait interval DEFAULT '1 hour')
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    from_shard text;
    mapped text;              -- the partition's shard in this router's map, before
    o text;
    runs integer;
    prev record;
    version bigint;
    s text;
    det text;
BEGIN
    PERFORM wfrouter._superuser('move_partition');
    PERFORM wfrouter._shard_timeout();   -- (a bad setting: refused first)
    -- (a partition or a shard that does not exist, a bad wait: the body
    -- refuses it)
    IF EXISTS (SELECT 1 FROM wfrouter.partitions m WHERE m.partition OPERATOR(pg_catalog.=) p)
       AND EXISTS (SELECT 1 FROM wfrouter.shards x WHERE x.shard OPERATOR(pg_catalog.=) to_shard) THEN
        mapped := (SELECT m.shard FROM wfrouter.partitions m WHERE m.partition OPERATOR(pg_catalog.=) p);
        FOR i IN 1..3 LOOP
            from_shard := COALESCE(
                (SELECT m.from_shard FROM wfrouter.moves m
                 WHERE m.partition OPERATOR(pg_catalog.=) p AND m.finished IS NULL),
                (SELECT m.shard FROM wfrouter.partitions m WHERE m.partition OPERATOR(pg_catalog.=) p));
            PERFORM wfrouter._move_lock(p, ARRAY[from_shard, to_shard],
                pg_catalog.format('move %s %s>%s', p, from_shard, to_shard));
            -- a move of this router under way: it goes on from where the shards are
            EXIT WHEN EXISTS (SELECT 1 FROM wfrouter.moves m
                              WHERE m.partition OPERATOR(pg_catalog.=) p AND m.finished IS NULL);
            o := wfrouter._remote_owner(from_shard, p);
            EXIT WHEN o OPERATOR(pg_catalog.=) from_shard;
            PERFORM wfrouter._move_unlock();
            IF o IS NULL OR wfrouter._remote_owner(o, p) IS DISTINCT FROM o THEN
                RAISE EXCEPTION 'partition % cannot be moved now: shard "%" gave it to shard "%", which has not taken it', p, from_shard, o
                    USING ERRCODE = 'object_in_use',
                          DETAIL = 'A move of the partition, made through another router, has not finished.',
                          HINT = 'Finish it with wfrouter.move_partition, or cancel it with wfrouter.cancel_move, on the router that made it (wfrouter.moves there).';
            END IF;
            -- another router moved it: this router learns the map of the
            -- shard that owns it (a map that gives every partition to a
            -- shard that took it), and moves from there
            PERFORM wfrouter._loopback(pg_catalog.format('SELECT wfrouter._learn_map(%L)::text', o));
            IF i OPERATOR(pg_catalog.=) 3 THEN
                RAISE EXCEPTION 'partition % cannot be moved now: it is on shard "%", not on shard "%" as this router''s map says', p, o, from_shard
                    USING ERRCODE = 'object_in_use',
                          HINT = 'Look at wfrouter.shard_map() on this router and wfshard.self on the shards.';
            END IF;
        END LOOP;
        -- the target owns the partition (its own map says so, and its move
        -- lock is held) and no move of this router is under way: done
        IF from_shard OPERATOR(pg_catalog.=) to_shard
           AND NOT EXISTS (SELECT 1 FROM wfrouter.moves m
                           WHERE m.partition OPERATOR(pg_catalog.=) p AND m.finished IS NULL) THEN
            BEGIN
                version := wfrouter._remote(to_shard, 'SELECT s.map_version FROM wfshard.self s')::bigint;
                -- a shard that missed the map of the move (down at its end)
                FOR s IN SELECT x.shard FROM wfrouter.shards x
                         WHERE x.shard OPERATOR(pg_catalog.<>) to_shard ORDER BY x.shard LOOP
                    BEGIN
                        IF wfrouter._remote_owner(s, p) IS DISTINCT FROM to_shard THEN
                            PERFORM wfrouter._remote(s, pg_catalog.format('SELECT wf.configure_shard(%L, %L, NULL, %s)',
                                s, wfrouter._map_with(p, to_shard), version));
                        END IF;
                    EXCEPTION WHEN OTHERS THEN
                        RAISE WARNING 'shard "%" did not take map version %: %', s, version, SQLERRM;
                    END;
                END LOOP;
            EXCEPTION WHEN OTHERS OR query_canceled THEN
                PERFORM wfrouter._move_unlock();
                RAISE;
            END;
            PERFORM wfrouter._move_unlock();
            SELECT * INTO prev FROM wfrouter.moves m WHERE m.partition OPERATOR(pg_catalog.=) p
            ORDER BY m.move_id DESC LIMIT 1;
            IF mapped OPERATOR(pg_catalog.<>) to_shard THEN
                det := pg_catalog.format('A move made through another router put it there: this router''s map gave it to shard "%s", '
                    'and now gives it to shard "%s" as the shards do (map version %s).', mapped, to_shard, version);
            ELSIF FOUND AND prev.to_shard OPERATOR(pg_catalog.=) to_shard AND prev.phase OPERATOR(pg_catalog.=) 'done' THEN
                det := pg_catalog.format('Its move from shard "%s" finished at %s (move %s in wfrouter.moves, %s runs).',
                    prev.from_shard, prev.finished, prev.move_id, COALESCE(prev.runs::text, 'no count of'));
            ELSE
                det := 'No move of it to that shard is recorded on this router (wfrouter.moves): it was there already.';
            END IF;
            RAISE NOTICE 'partition % is on shard "%" already, nothing to move', p, to_shard
                USING DETAIL = det;
            RETURN 0;
        END IF;
    END IF;
    BEGIN
        runs := wfrouter._move_partition(p, to_shard, wait, copy_wait);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM wfrouter._move_unlock();
        RAISE;
    END;
    PERFORM wfrouter._move_unlock();
    RETURN runs;
END
$$;

COMMENT ON FUNCTION wfrouter.move_partition(integer, text, interval, interval) IS
'For superusers: moves partition p''s tenants, with all their runs, to shard to_shard on logical replication (the partition stays live while it is copied; it is refused only during the cut-over), and gives it the partition on the router and every shard; returns the number of runs moved. copy_wait bounds the copy; wait bounds the catch-up, how long the cut-over waits for the tenants'' open transactions, and how long a shard may be unreachable or the copy keep failing before the move stops. One move at a time per shard, whatever router makes it (a move of the source or target under way: 55006). Progress in wfrouter.moves; run again after any failure, or cancel with wfrouter.cancel_move. A partition the shards show on to_shard already (its move finished, also through another router) is left as it is: a NOTICE says so, and 0 is returned.';
REVOKE ALL ON FUNCTION wfrouter.move_partition(integer, text, interval, interval) FROM PUBLIC;

-- undoes a move that has not cut over, with the move locks of its source
-- and target held; the source takes the partition back only if it gave it
-- to this move's target (a map that names a third shard is another
-- move's), and what the copy made goes through wfrouter._copy_drop
CREATE OR REPLACE FUNCTION wfrouter.cancel_move(p integer)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    mv record;
    o text;
BEGIN
    PERFORM wfrouter._superuser('cancel_move');
    SELECT * INTO mv FROM wfrouter.moves m WHERE m.partition OPERATOR(pg_catalog.=) p AND m.finished IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no move of partition % is under way', p
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- no move of its source or target runs meanwhile, through any router
    PERFORM wfrouter._move_lock(p, ARRAY[mv.from_shard, mv.to_shard], pg_catalog.format('cancel %s %s>%s', p, mv.from_shard, mv.to_shard));
    BEGIN
        -- a cut-over still waiting on the target (its router session died)
        -- ends first: it would take the partition after the source took it back
        PERFORM wfrouter._end_cutover(mv.to_shard, p);
        IF wfrouter._remote_owner(mv.to_shard, p) OPERATOR(pg_catalog.=) mv.to_shard THEN
            RAISE EXCEPTION 'partition % has cut over to shard "%" already', p, mv.to_shard
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Finish the move with wfrouter.move_partition, then move the partition back.';
        END IF;
        -- the source takes the partition back only if it gave it to this
        -- move's target (a map that names a third shard is another move's)
        o := wfrouter._remote_owner(mv.from_shard, p);
        IF o OPERATOR(pg_catalog.=) mv.to_shard THEN
            PERFORM wfrouter._remote(mv.from_shard, pg_catalog.format('SELECT wf.configure_shard(%L, %L)',
                mv.from_shard, wfrouter._map_with(p, mv.from_shard)));
        END IF;
        -- the subscription (also one whose slot is gone from the source),
        -- the target's copy, the slots and the publication
        PERFORM wfrouter._copy_drop(p, mv.from_shard, mv.to_shard);
        PERFORM wfrouter._note(mv.move_id, 'cancelled');
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM wfrouter._move_unlock();
        RAISE;
    END;
    PERFORM wfrouter._move_unlock();
    IF o OPERATOR(pg_catalog.<>) mv.from_shard AND o OPERATOR(pg_catalog.<>) mv.to_shard THEN
        RETURN pg_catalog.format('partition %s is on shard "%s"', p, o);
    END IF;
    RETURN pg_catalog.format('partition %s stays on shard "%s"', p, mv.from_shard);
END
$$;

COMMENT ON FUNCTION wfrouter.cancel_move(integer) IS
'For superusers: undoes a move of partition p that has not cut over (the partition stays on its source, the target''s copy and the replication objects go).';

-- ==== a call refused by the shard a move has just left (issue 30) ====
-- A call routed with the map of before a cut-over, refused by the source
-- (55W01), was answered with 40001 when this router's map had changed
-- meanwhile: the map then learned from the shard it names was not newer,
-- and the call gave up.  A map that no longer sends the tenant to the
-- shard that refused (named in its message) is now taken as learned: the
-- call is made once more, on the shard the map names now.
CREATE OR REPLACE FUNCTION wfrouter._retry(tries integer, st text, msg text, det text, hnt text)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tenant text := wfrouter.current_tenant();
    shard text := wfrouter.tenant_shard(tenant);
    refused_by text;
BEGIN
    IF st OPERATOR(pg_catalog.=) '55W01' THEN
        -- (wfengine's message: tenant "<t>" does not live on shard "<s>")
        refused_by := pg_catalog.substring(msg, 'does not live on shard "([^"]*)"');
        IF tries OPERATOR(pg_catalog.=) 0
           AND (shard IS DISTINCT FROM COALESCE(refused_by, shard)
                OR wfrouter._learn_map(shard)) THEN
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
