#!/usr/bin/env bash
# Prepares this machine for the test suite; `make test` runs it first (its
# test-deps target). Besides Go, the tests need:
#   - root: one test mounts a tmpfs under a store to fill its disk at once,
#     others run clients as another OS user (runuser);
#   - gcc and the C library's headers: the race detector needs cgo;
#   - PostgreSQL's server binaries and its postgres user (Debian's
#     postgresql): the connector's tests start private servers (pkg/pgtest);
#   - a PostgreSQL server on 127.0.0.1:5432 trusting the postgres user, or
#     CONDUIT_TEST_POSTGRES_URL naming another: the store and cluster tests
#     create and drop their own databases there;
#   - Chromium at /usr/bin/chromium: the web console's browser tests;
#   - promtool (Debian's prometheus): the alerting rules' unit tests.
# As root on Debian it installs what is missing with apt-get and starts the
# machine's PostgreSQL when it is not running; otherwise it says exactly
# what to install and exits non-zero before any test runs.
set -euo pipefail

GO=${GO:-go}
me="make test"
# sysroot prefixes the fixed paths looked at (its own test points it at an
# empty directory); commands are found on PATH.
sysroot=${TEST_DEPS_SYSROOT:-}
packages=()   # Debian packages to install, in order
problems=()   # what no package here fixes

add() {
	local p
	for p in "$@"; do
		[[ " ${packages[*]} " == *" $p "* ]] || packages+=("$p")
	done
}

have_initdb() {
	command -v initdb >/dev/null 2>&1 || compgen -G "$sysroot/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

if ! command -v "$GO" >/dev/null 2>&1; then
	problems+=("Go 1.26 or newer: no '$GO' on PATH (Go's release for linux, usually at /usr/local/go, with /usr/local/go/bin on PATH)")
fi
command -v gcc >/dev/null 2>&1 || add gcc libc6-dev
[ -e "$sysroot/usr/include/stdlib.h" ] || add libc6-dev
have_initdb || add postgresql
id -u postgres >/dev/null 2>&1 || add postgresql
command -v pg_isready >/dev/null 2>&1 || add postgresql-client
[ -x "$sysroot/usr/bin/chromium" ] || add chromium
command -v promtool >/dev/null 2>&1 || add prometheus
command -v runuser >/dev/null 2>&1 || add util-linux
# postgresql brings postgresql-client (pg_isready); name only the one.
if [[ " ${packages[*]} " == *" postgresql "* ]]; then
	kept=()
	for p in "${packages[@]}"; do
		[ "$p" = postgresql-client ] || kept+=("$p")
	done
	packages=("${kept[@]}")
fi

root=false
[ "$(id -u)" -eq 0 ] && root=true
apt=false
command -v apt-get >/dev/null 2>&1 && apt=true

if [ ${#packages[@]} -gt 0 ]; then
	if $root && $apt; then
		echo "$me: installing what the tests need: ${packages[*]}" >&2
		export DEBIAN_FRONTEND=noninteractive
		# Wait for another apt or dpkg run instead of failing at once.
		lock=(-o DPkg::Lock::Timeout=300)
		apt-get update -qq "${lock[@]}"
		# prometheus only for promtool: not its recommended exporters.
		rest=()
		for p in "${packages[@]}"; do
			[ "$p" = prometheus ] || rest+=("$p")
		done
		if [ ${#rest[@]} -gt 0 ]; then
			apt-get install -y -qq "${rest[@]}" "${lock[@]}" >/dev/null
		fi
		if [[ " ${packages[*]} " == *" prometheus "* ]]; then
			apt-get install -y -qq --no-install-recommends prometheus "${lock[@]}" >/dev/null
		fi
	else
		why="not root"
		$apt || why="no apt-get"
		$root || $apt || why="not root and no apt-get"
		problems+=("the Debian packages ${packages[*]} ($why, so $me cannot install them; as root: apt-get install ${packages[*]})")
	fi
fi

if ! $root; then
	problems+=("root: one test mounts a tmpfs, others run clients as another OS user; run it as root (sudo $me)")
fi

if [ ${#problems[@]} -gt 0 ]; then
	{
		echo "$me: this machine lacks what the tests need:"
		for p in "${problems[@]}"; do
			echo "  - $p"
		done
		echo "(docs/development.md: what make test needs)"
	} >&2
	exit 1
fi

# The store and cluster tests use the machine's PostgreSQL at
# 127.0.0.1:5432 unless CONDUIT_TEST_POSTGRES_URL names another server;
# start the machine's when it is not answering.
if [ -z "${CONDUIT_TEST_POSTGRES_URL:-}" ] && ! pg_isready -q -h 127.0.0.1 -p 5432; then
	version=$( (ls "$sysroot/etc/postgresql" 2>/dev/null || true) | sort -V | tail -n1)
	if [ -z "$version" ] || [ ! -d "$sysroot/etc/postgresql/$version/main" ]; then
		echo "$me: no PostgreSQL answers on 127.0.0.1:5432 and there is no cluster to start (pg_createcluster --start <version> main, or set CONDUIT_TEST_POSTGRES_URL)" >&2
		exit 1
	fi
	echo "$me: starting the machine's PostgreSQL ($version main)" >&2
	pg_ctlcluster --skip-systemctl-redirect "$version" main start
	for _ in $(seq 1 30); do
		pg_isready -q -h 127.0.0.1 -p 5432 && break
		sleep 1
	done
	if ! pg_isready -q -h 127.0.0.1 -p 5432; then
		echo "$me: PostgreSQL $version main started but does not answer on 127.0.0.1:5432 (its port and listen_addresses are in /etc/postgresql/$version/main/postgresql.conf)" >&2
		exit 1
	fi
fi
