#!/usr/bin/env python3
"""check.py -- keeps docs/definition.schema.json equal to the C validator.

Every definition under test/definitions/ goes through both:

  * the C validator: wf.publish_definition() in a subtransaction that is
    rolled back (the only way to validate exactly as publishing does),
    in a scratch database made for the purpose (PG* environment, psql);
  * the JSON Schema (python3-jsonschema, Draft 2020-12).

and the folder says what both must answer (the corpus, below, says it of
each of its cases):

  accepted/      C accepts, and so does the schema
  refused/       C refuses (a structural error), and so does the schema
  publish_only/  C refuses for a reason JSON Schema cannot express (a graph
                 or semantic check); the schema accepts it.  REASONS.txt
                 gives the reason of each file ("FILE: reason").

Then the same of the boundary cases test/definitions/corpus.py makes from
the server's own rules (durations at and past the limit in every unit,
step counts around wfengine.max_steps, repeated approvers, every name at
its length limit...): the server must give the verdict the case wants,
and the schema the same one, or, for a case the schema cannot decide
(corpus.EXCEPT gives why), the other one.  The schema's duration pattern
must be the one corpus.duration_pattern() makes from src/duration.c.

Prints TAP (one test per file and per case, plus the schema's own checks),
for prove:
    prove --exec python3 test/definitions/check.py
Usage: check.py [--verdicts FILE...]  (prints both verdicts, for sorting new files)
"""
import glob
import json
import os
import subprocess
import sys

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "test", "definitions")
SCHEMA = os.path.join(ROOT, "docs", "definition.schema.json")
DB = "wf_definition_schema"


def psql(sql, db="postgres"):
    return subprocess.run(["psql", "-XqAt", "-v", "ON_ERROR_STOP=1", "-d", db],
                          input=sql, capture_output=True, text=True, check=True).stdout


def dollar(s):
    tag = "$spec$"
    while tag in s:
        tag = tag[:-1] + "x$"
    return tag + s + tag


def server_max_steps():
    """The server's wfengine.max_steps (the library is preloaded)."""
    return int(psql("SELECT current_setting('wfengine.max_steps')").strip())


def c_verdicts(texts, subdefinitions=()):
    """The C validator's verdict of each text: 'ok' or 'SQLSTATE: message'.
    subdefinitions: more definition names to publish first."""
    psql(f"DROP DATABASE IF EXISTS {DB}")
    psql(f"CREATE DATABASE {DB}")
    try:
        rows = ["(%d, %s)" % (i, dollar(t)) for i, t in enumerate(texts)]
        subs = ", ".join("'%s'" % n for n in subdefinitions)
        sql = """
SET client_min_messages = warning;
CREATE EXTENSION wfengine;
-- sub-definitions the corpus names, so that their absence is not the verdict
SELECT wf.publish_definition(n, '{"steps": [{"name": "a", "queue": "q"}]}')
FROM unnest(ARRAY['child', 'kid', 'sub', 'leaf', 'inner', 'c', 'kyc', 'h_mig', 'lim_child', 'w_wait'%s]) n;
CREATE FUNCTION pg_temp.verdict(spec text) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
    BEGIN
        PERFORM wf.publish_definition('schema_corpus', spec::jsonb);
        RAISE EXCEPTION USING ERRCODE = 'P0099';
    EXCEPTION WHEN SQLSTATE 'P0099' THEN
        RETURN 'ok';
    WHEN OTHERS THEN
        RETURN SQLSTATE || ': ' || replace(SQLERRM, E'\\n', ' ');
    END;
END
$f$;
SELECT i, pg_temp.verdict(t) FROM (VALUES %s) v(i, t) ORDER BY i;
""" % ((", " + subs) if subs else "", ",\n".join(rows))
        out = psql(sql, DB)
    finally:
        psql(f"DROP DATABASE IF EXISTS {DB}")
    result = {}
    for line in out.splitlines():
        i, _, v = line.partition("|")
        result[int(i)] = v
    return [result[i] for i in range(len(texts))]


def schema_verdict(validator, text):
    try:
        doc = json.loads(text)
    except ValueError as e:
        return "not JSON: %s" % e
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if not errors:
        return "ok"
    e = errors[0]
    return "%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(root)", e.message[:200])


def main(argv):
    schema = json.load(open(SCHEMA))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)

    if argv[:1] == ["--verdicts"]:
        files = argv[1:]
        texts = [open(f).read() for f in files]
        for f, t, c in zip(files, texts, c_verdicts(texts)):
            print("%s\n  C:      %s\n  schema: %s" % (f, c, schema_verdict(validator, t)))
        return 0

    reasons = {}
    rpath = os.path.join(HERE, "publish_only", "REASONS.txt")
    if os.path.exists(rpath):
        for line in open(rpath):
            if ":" in line and not line.startswith("#"):
                k, _, v = line.partition(":")
                reasons[k.strip()] = v.strip()
    cases = []
    for folder in ("accepted", "refused", "publish_only"):
        for f in sorted(glob.glob(os.path.join(HERE, folder, "*.json"))):
            cases.append((folder, f))
    texts = [open(f).read() for _, f in cases]

    max_steps = server_max_steps()
    generated = corpus.cases(max_steps)
    schema_max_steps = schema["properties"]["steps"].get("maxItems")
    pattern = schema["$defs"]["duration"]["oneOf"][1].get("pattern")

    verdicts = c_verdicts(texts + [g.text for g in generated], corpus.SUBDEFINITIONS)

    print("1..%d" % (len(cases) + len(generated) + 3))
    print("ok 1 - docs/definition.schema.json is a valid Draft 2020-12 schema")
    failed = 0
    n = 2
    for (folder, f), text, c in zip(cases, texts, verdicts):
        s = schema_verdict(validator, text)
        name = os.path.relpath(f, HERE)
        if folder == "accepted":
            good = c == "ok" and s == "ok"
        elif folder == "refused":
            good = c != "ok" and s != "ok"
        else:
            good = c != "ok" and s == "ok" and bool(reasons.get(os.path.basename(f)))
        print("%s %d - %s" % ("ok" if good else "not ok", n, name))
        n += 1
        if not good:
            failed += 1
            print("#   C validator: %s" % c)
            print("#   JSON Schema: %s" % s)
            if folder == "publish_only" and not reasons.get(os.path.basename(f)):
                print("#   no reason in publish_only/REASONS.txt")

    good = pattern == corpus.duration_pattern()
    print("%s %d - the schema's duration pattern is corpus.duration_pattern() (src/duration.c)"
          % ("ok" if good else "not ok", n))
    n += 1
    if not good:
        failed += 1
        print("#   schema: %s\n#   corpus: %s" % (pattern, corpus.duration_pattern()))
    good = schema_max_steps == max_steps
    print("%s %d - the schema's maxItems of steps (%s) is the server's wfengine.max_steps (%d)"
          % ("ok" if good else "not ok", n, schema_max_steps, max_steps))
    n += 1
    if not good:
        failed += 1

    for g, c in zip(generated, verdicts[len(texts):]):
        s = schema_verdict(validator, g.text)
        server_ok = c == "ok"
        schema_ok = s == "ok"
        skip = ""
        if g.exc is None:
            good = server_ok == g.want and schema_ok == g.want
        else:
            good = server_ok == g.want and schema_ok != g.want
        if "max_steps" in g.name and schema_max_steps != max_steps:
            skip = " # SKIP wfengine.max_steps is %d, the schema has the default %s" % (
                max_steps, schema_max_steps)
            good = True
        label = "corpus: %s: %s" % (g.name, "accepted" if g.want else "refused")
        if g.exc:
            label += " (the schema %s: %s)" % ("refuses" if g.want else "accepts",
                                                corpus.EXCEPT[g.exc])
        print("%s %d - %s%s" % ("ok" if good else "not ok", n, label, skip))
        n += 1
        if not good:
            failed += 1
            print("#   C validator: %s" % c[:300])
            print("#   JSON Schema: %s" % s)
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
