#!/usr/bin/env bash
# Starts a local PostgreSQL for the pgstore tests and exports its DSN.
#
#   source .ci/postgres.sh          # exports AIONOTEL_POSTGRES_DSN here
#   eval "$(bash .ci/postgres.sh)"  # the same, from a subshell
#
# Installs the Debian package `postgresql` when pg_ctlcluster is missing,
# starts the newest installed cluster (tolerating one already running),
# creates the role and database below if they do not exist yet, and exports
# AIONOTEL_POSTGRES_DSN. Logs go to stderr; stdout carries only the export
# line. Safe to run again. Meant to be sourced under `set -euo pipefail`: it
# defines no variables of its own in the caller (everything runs in a
# function with locals) and never calls `exit` on success. A failing step
# fails the caller, as set -e intends.
#
# Overridable: AIONOTEL_PG_ROLE, AIONOTEL_PG_PASSWORD, AIONOTEL_PG_DATABASE.

aionotel_postgres_setup() {
	local role="${AIONOTEL_PG_ROLE:-aionotel}"
	local password="${AIONOTEL_PG_PASSWORD:-aionotel}"
	local database="${AIONOTEL_PG_DATABASE:-aionotel_test}"
	local sudo="" as_postgres
	if [ "$(id -u)" -ne 0 ]; then
		sudo="sudo"
		as_postgres="sudo -u postgres"
	elif command -v runuser >/dev/null 2>&1; then
		as_postgres="runuser -u postgres --"
	else
		as_postgres="su postgres -s /bin/sh -c"
	fi
	# Runs psql as the postgres superuser over the local socket (peer auth).
	_aionotel_psql() {
		if [ "$as_postgres" = "su postgres -s /bin/sh -c" ]; then
			su postgres -s /bin/sh -c "psql -X -q -v ON_ERROR_STOP=1 -p $port $(printf '%q ' "$@")"
		else
			$as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$port" "$@"
		fi
	}

	if ! command -v pg_ctlcluster >/dev/null 2>&1; then
		echo "postgres.sh: installing PostgreSQL (Debian package postgresql)" >&2
		if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e '^lock$' -e '^partial$' || true)" ]; then
			$sudo apt-get update >&2
		fi
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends postgresql >&2
	fi

	local version
	version="$(ls /usr/lib/postgresql | sort -V | tail -n 1)"
	if [ -z "$version" ]; then
		echo "postgres.sh: no PostgreSQL server under /usr/lib/postgresql" >&2
		return 1
	fi
	if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" { found = 1 } END { exit !found }'; then
		echo "postgres.sh: creating cluster $version/main" >&2
		$sudo pg_createcluster "$version" main >&2
	fi
	if ! $sudo pg_ctlcluster "$version" main status >/dev/null 2>&1; then
		echo "postgres.sh: starting cluster $version/main" >&2
		# Another caller may have started it in between: only a cluster that
		# is still down afterwards is an error.
		$sudo pg_ctlcluster "$version" main start >&2 ||
			$sudo pg_ctlcluster "$version" main status >/dev/null
	fi
	local port
	port="$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" { print $3 }')"
	local tries=0
	until pg_isready -q -h 127.0.0.1 -p "$port"; do
		tries=$((tries + 1))
		if [ "$tries" -gt 50 ]; then
			echo "postgres.sh: PostgreSQL on port $port is not accepting connections" >&2
			return 1
		fi
		sleep 0.2
	done

	# Role and database, created only when missing. The names are fixed
	# identifiers, so they are quoted with format(%I) / %L inside SQL.
	_aionotel_psql -d postgres -v role="$role" -v password="$password" <<'SQL' >&2
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :'role', :'password')
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I LOGIN PASSWORD %L', :'role', :'password') \gexec
SQL
	_aionotel_psql -d postgres -v role="$role" -v database="$database" <<'SQL' >&2
SELECT format('CREATE DATABASE %I OWNER %I', :'database', :'role')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'database') \gexec
SQL
	unset -f _aionotel_psql

	export AIONOTEL_POSTGRES_DSN="postgres://${role}:${password}@127.0.0.1:${port}/${database}?sslmode=disable"
	echo "postgres.sh: PostgreSQL $version ready on 127.0.0.1:$port, database $database" >&2
	echo "export AIONOTEL_POSTGRES_DSN='$AIONOTEL_POSTGRES_DSN'"
}

aionotel_postgres_setup
unset -f aionotel_postgres_setup
