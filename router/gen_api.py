#!/usr/bin/env python3
"""gen_api.py: writes the routed API section of wfengine_router--0.1.0.sql.

Each routed function of a shard's API (api.txt: name|arguments|result|role,
as pg_get_function_arguments and pg_get_function_result print them on a
shard) becomes three functions on the router:
  wfrouter."p:<name>"  the PL/Proxy call (cluster wfengine, RUN ON the
                       caller's tenant), with the shard's result columns;
  wfrouter."r:<name>"  PL/pgSQL around it, positional, that handles the
                       shard's answers a client cannot: 55W01 (the shard
                       does not own the tenant: the router learns the map
                       from it and tries once more) and PL/Proxy's XX000 of a
                       shard it cannot reach (08006, naming the shard);
  wf.<name>            the API itself, the shard's signature, in SQL.
Run: python3 router/gen_api.py < router/api.txt > section.sql
"""
import re
import sys


def split_top(s):
    """splits on commas outside parentheses and quotes"""
    out, depth, cur, q = [], 0, '', False
    for ch in s:
        if ch == "'" :
            q = not q
        if not q and ch == '(':
            depth += 1
        if not q and ch == ')':
            depth -= 1
        if not q and depth == 0 and ch == ',':
            out.append(cur.strip())
            cur = ''
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def arg_type(a):
    a = re.sub(r'\s+DEFAULT\s+.*$', '', a)
    return a.split(' ', 1)[1]


for line in sys.stdin:
    line = line.strip()
    if not line or line.startswith('#'):
        continue
    name, args, result, role = line.split('|')
    argl = split_top(args)
    types = [arg_type(a) for a in argl]
    pos = ', '.join('$%d' % (i + 1) for i in range(len(argl)))
    sig_types = ', '.join(types)
    setof = result.startswith('TABLE(')
    if setof:
        cols = split_top(result[6:-1])
        ocols = ', '.join('"o:%s" %s' % (c.split(' ', 1)[0], c.split(' ', 1)[1]) for c in cols)
        rres = 'TABLE(%s)' % ocols
    else:
        rres = result
    print('CREATE FUNCTION wfrouter."p:%s"(%s)\nRETURNS %s\nLANGUAGE plproxy AS $$\n'
          '    CLUSTER \'wfengine\';\n    RUN ON wfrouter.route();\n    TARGET wf.%s;\n$$;\n'
          % (name, args, result, name))
    if setof:
        body = ('            RETURN QUERY SELECT * FROM wfrouter."p:%s"(%s);\n            RETURN;\n' % (name, pos))
    else:
        body = '            RETURN wfrouter."p:%s"(%s);\n' % (name, pos)
    print('CREATE FUNCTION wfrouter."r:%s"(%s)\nRETURNS %s\nLANGUAGE plpgsql\n'
          'SET search_path = pg_catalog, pg_temp\nAS $$\nDECLARE\n    tries integer := 0;\n'
          '    st text;\n    msg text;\n    det text;\n    hnt text;\nBEGIN\n    LOOP\n        BEGIN\n%s'
          '        EXCEPTION WHEN SQLSTATE \'55W01\' OR SQLSTATE \'XX000\' THEN\n'
          '            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,\n'
          '                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;\n'
          '            tries := wfrouter._retry(tries, st, msg, det, hnt);\n'
          '        END;\n    END LOOP;\nEND\n$$;\n' % (name, sig_types, rres, body))
    if setof:
        call = 'SELECT * FROM wfrouter."r:%s"(%s)' % (name, pos)
    else:
        call = 'SELECT wfrouter."r:%s"(%s)' % (name, pos)
    print('CREATE FUNCTION wf.%s(%s)\nRETURNS %s\nLANGUAGE sql\nAS $$ %s $$;\n' % (name, args, result, call))
    print('GRANT EXECUTE ON FUNCTION wfrouter."p:%s"(%s), wfrouter."r:%s"(%s), wf.%s(%s) TO %s;\n'
          % (name, sig_types, name, sig_types, name, sig_types, role))
