# ensure_postgres URL: make sure a PostgreSQL server answers at URL, starting the machine's cluster,
# or installing Debian's postgresql first, when it does not. Sourced by .ci/run.

postgres_answers() { pg_isready -q -d "$1" 2>/dev/null; }

ensure_postgres() {
  local url=$1
  if command -v pg_isready >/dev/null && postgres_answers "$url"; then
    echo "PostgreSQL answers at the test URL"
    return
  fi
  if ! command -v pg_ctlcluster >/dev/null; then
    echo "installing PostgreSQL (Debian's postgresql package)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq postgresql >/dev/null
  fi
  local version
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  echo "starting the PostgreSQL $version cluster"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 1 30); do
    postgres_answers "$url" && break
    sleep 1
  done
  postgres_answers "$url" || fail "PostgreSQL does not answer at the test URL after starting the cluster"
  prepare_test_database "$url"
}

# prepare_test_database URL: a freshly installed cluster asks for passwords over TCP and lacks the
# database the URL names. Let its postgres user in from loopback without one and create the
# database (a throwaway CI cluster only: never point this at a server that matters).
prepare_test_database() {
  local url=$1 port database hba
  psql -w "$url" -Atc 'SELECT 1' >/dev/null 2>&1 && return
  port=$(sed -E 's|^[^@]*@[^:/]*:?([0-9]*)/.*|\1|' <<<"$url"); port=${port:-5432}
  database=$(basename "${url%%\?*}")
  hba=$(su postgres -c "psql -p $port -Atc 'SHOW hba_file'")
  if ! grep -q '^host all postgres 127.0.0.1/32 trust' "$hba"; then
    sed -i '1i host all postgres 127.0.0.1/32 trust' "$hba"
    su postgres -c "psql -p $port -Atc 'SELECT pg_reload_conf()'" >/dev/null
  fi
  su postgres -c "psql -p $port -Atc \"SELECT 1 FROM pg_database WHERE datname = '$database'\"" | grep -q 1 ||
    su postgres -c "createdb -p $port '$database'"
  psql -w "$url" -Atc 'SELECT 1' >/dev/null || fail "cannot connect to PostgreSQL at the test URL: check pg_hba.conf"
}
