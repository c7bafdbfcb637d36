# shellcheck shell=bash
# Makes a PostgreSQL that LPS can use available and exports DATABASE_URL. Sourced by the
# project's scripts.
#
# - DATABASE_URL already set: it is used as given (only checked for reachability).
# - Otherwise the local Debian cluster is used: installed when missing, started when
#   stopped, and a role `lps` (password `lps`, CREATEDB, for `#[sqlx::test]`'s scratch
#   databases) plus a database `lps` are created over the local socket as the postgres
#   superuser, so this works whether TCP asks for a password or trusts.

lps_log() { printf '[lps] %s\n' "$*" >&2; }

# lps_pg_url_with_db URL DB: URL with its database name replaced by DB.
lps_pg_url_with_db() {
  local url=$1 db=$2 base query=""
  if [[ $url == *\?* ]]; then query="?${url#*\?}"; url=${url%%\?*}; fi
  base=${url%/*}
  if [[ $base == *:/ ]]; then base=$url; fi   # URL had no database part
  printf '%s/%s%s' "$base" "$db" "$query"
}

lps_pg_reachable() {
  psql "$1" -qAtc 'select 1' >/dev/null 2>&1
}

lps_as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi
}

lps_pg_install() {
  if ! command -v pg_lsclusters >/dev/null 2>&1; then
    lps_log "installing PostgreSQL (apt-get install postgresql)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq postgresql >/dev/null
  fi
}

lps_pg_start_local() {
  local ver cluster status
  read -r ver cluster _ status _ < <(pg_lsclusters --no-header | head -n 1)
  if [ -z "${ver:-}" ]; then
    lps_log "no PostgreSQL cluster found; creating one"
    ver=$(ls /usr/lib/postgresql | sort -n | tail -n 1)
    pg_createcluster "$ver" main >/dev/null
    cluster=main
    status=down
  fi
  if [ "$status" != online ]; then
    lps_log "starting PostgreSQL $ver/$cluster"
    pg_ctlcluster --skip-systemctl-redirect "$ver" "$cluster" start
  fi
  for _ in $(seq 1 50); do
    lps_as_postgres psql -qAtc 'select 1' >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  lps_log "PostgreSQL $ver/$cluster did not come up"
  return 1
}

lps_pg_ensure() {
  if [ -n "${DATABASE_URL:-}" ]; then
    if ! command -v psql >/dev/null 2>&1; then
      apt-get update -qq >/dev/null && apt-get install -y -qq postgresql-client >/dev/null
    fi
    if ! lps_pg_reachable "$DATABASE_URL"; then
      lps_log "DATABASE_URL is set but the database cannot be reached"
      return 1
    fi
    return 0
  fi
  lps_pg_install
  lps_pg_start_local
  lps_as_postgres psql -q -v ON_ERROR_STOP=1 <<'SQL' >/dev/null
do $$
begin
  if not exists (select from pg_roles where rolname = 'lps') then
    create role lps login createdb password 'lps';
  else
    alter role lps login createdb password 'lps';
  end if;
end $$;
SQL
  if ! lps_as_postgres psql -qAtc "select 1 from pg_database where datname = 'lps'" | grep -q 1; then
    lps_as_postgres createdb -O lps lps
  fi
  local port
  port=$(pg_lsclusters --no-header | awk 'NR==1 {print $3}')
  export DATABASE_URL="postgres://lps:lps@127.0.0.1:${port:-5432}/lps"
  if ! lps_pg_reachable "$DATABASE_URL"; then
    lps_log "cannot connect as lps over TCP (check pg_hba.conf allows 127.0.0.1)"
    return 1
  fi
}
