#!/usr/bin/env bash
# deps.sh — make sure the Debian packages needed to build and test wfengine
# are installed.  Idempotent and silent when everything is already there;
# otherwise runs `apt-get update` + `apt-get install` (directly as root, via
# sudo as a normal user).  Finally checks that the PostgreSQL 15 pg_config is
# usable, so a machine with several majors installed still builds for 15.
#
# Usage: bash test/scripts/deps.sh          (also run by `make test` / `make demo`)
set -euo pipefail

PG_MAJOR=15
export PG_CONFIG=/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config

packages=(
	"postgresql-${PG_MAJOR}"
	"postgresql-server-dev-${PG_MAJOR}"
	"postgresql-${PG_MAJOR}-cron"
	"postgresql-${PG_MAJOR}-pgtap"
	"postgresql-${PG_MAJOR}-plproxy" # the router (router/, test/t/120_shards.pl)
	"postgresql-${PG_MAJOR}-auto-failover" # pg_autoctl and its monitor (test/t/140_failover.pl)
	postgresql-contrib
	libsodium-dev
	libipc-run-perl                        # PostgreSQL::Test::Cluster (TAP tests)
	libtap-parser-sourcehandler-pgtap-perl # pg_prove
	build-essential
	gcc
	make
	clang              # the fuzz harness (test/scripts/fuzz.sh)
	libclang-rt-14-dev # libFuzzer's runtime for clang 14
	python3-jsonschema # test/definitions/check.py (docs/definition.schema.json)
	prometheus-postgres-exporter # test/t/110_metrics.pl scrapes it (monitoring/queries.yaml)
	pgbouncer          # test/t/130_pgbouncer.pl: workers behind a pooler
	# the worker libraries of clients/ (test/scripts/clients.sh)
	libpq-dev                    # clients/c
	python3-psycopg              # clients/python (psycopg 3); test/t/130_pgbouncer.pl
	golang-go                    # clients/go
	golang-github-jackc-pgx-v4-dev # clients/go: pgx v4 (GOPATH mode, /usr/share/gocode)
	nodejs                       # clients/node (pg comes from npm: package-lock.json)
)

# npm: Debian's package, unless an npm is there already (NodeSource's nodejs
# bundles one and conflicts with Debian's npm package)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for pkg in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
	[[ $status == installed ]] || missing+=("$pkg")
done

if ((${#missing[@]})); then
	echo "deps.sh: installing missing packages: ${missing[*]}"
	if ((EUID == 0)); then
		as_root=(env)
	elif command -v sudo >/dev/null 2>&1; then
		as_root=(sudo env)
	else
		echo "deps.sh: not root and sudo is not available; install these as root: ${missing[*]}" >&2
		exit 1
	fi
	"${as_root[@]}" DEBIAN_FRONTEND=noninteractive apt-get update -q
	"${as_root[@]}" DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends "${missing[@]}"
fi

if [[ ! -x $PG_CONFIG ]]; then
	echo "deps.sh: $PG_CONFIG not found (is postgresql-server-dev-${PG_MAJOR} installed?)" >&2
	exit 1
fi
version=$("$PG_CONFIG" --version)
if [[ $version != "PostgreSQL ${PG_MAJOR}."* ]]; then
	echo "deps.sh: $PG_CONFIG reports '$version', expected PostgreSQL ${PG_MAJOR}" >&2
	exit 1
fi
