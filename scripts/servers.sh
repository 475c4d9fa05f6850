# shellcheck shell=bash
# Local test servers for the test suite; sourced by scripts/test.
#
#   servers_install  installs what is missing into .tools/ (ignored by git):
#                    .tools/venv  python venv with moto[server] (S3 + DynamoDB)
#                    .tools/node  npm prefix with azurite (Azure Blob) and s3rver
#                    (an S3 without conditional writes). Logs go to .tools/*.log.
#   servers_start    starts the three servers on free loopback ports, creates the
#                    bucket / container `concord-test`, and exports
#                      CONCORD_TEST_S3_ENDPOINT      moto (S3 and DynamoDB)
#                      CONCORD_TEST_AZURE_ENDPOINT   azurite blob (no account path)
#                      CONCORD_TEST_S3RVER_ENDPOINT  s3rver
#                      CONCORD_TEST_BUCKET           concord-test
#                      CONCORD_REQUIRE_SERVERS       1
#                    On any failure it stops what it started and returns 1.
#   servers_stop     stops exactly the processes servers_start started (each runs
#                    in its own session; its whole process group is killed) and
#                    removes their temporary folder. Safe to call twice.
#
# Needs python3 (3.8+), node and npm (Node 18+), curl; setsid is used when present.

SERVERS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SERVERS_TOOLS="$SERVERS_ROOT/.tools"
SERVERS_MOTO_VERSION="5.2.5"
SERVERS_AZURITE_VERSION="3.35.0"
SERVERS_S3RVER_VERSION="3.7.1"
SERVERS_BUCKET="concord-test"
SERVERS_START_TIMEOUT="${CONCORD_SERVERS_TIMEOUT:-60}"

SERVERS_DIR=""      # temporary folder: logs, pid files, s3rver data
SERVERS_NAMES=()    # names of the servers started, in order
SERVERS_PGIDS=()    # their process group ids (= pid of the session leader)
SERVERS_CHILDREN=() # pids of the background jobs this shell started, to reap

_servers_say() { echo "servers: $*" >&2; }

_servers_need() {
    local cmd
    for cmd in "$@"; do
        command -v "$cmd" >/dev/null 2>&1 || { _servers_say "$cmd is not installed; it is needed for the test servers"; return 1; }
    done
}

# True when .tools/venv holds a working python with the pinned moto and flask.
_servers_moto_ok() {
    [[ -x "$SERVERS_TOOLS/venv/bin/moto_server" ]] || return 1
    "$SERVERS_TOOLS/venv/bin/python" - "$SERVERS_MOTO_VERSION" >/dev/null 2>&1 <<'EOF'
import importlib.metadata as m, importlib.util as u, sys
assert m.version("moto") == sys.argv[1]
assert all(u.find_spec(p) for p in ("flask", "flask_cors", "werkzeug", "boto3"))
EOF
}

# Prints the version of an npm package installed in .tools/node, or nothing.
_servers_npm_version() {
    local pkg="$SERVERS_TOOLS/node/node_modules/$1/package.json"
    [[ -f "$pkg" ]] || return 0
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$pkg" 2>/dev/null || true
}

_servers_node_ok() {
    local bin="$SERVERS_TOOLS/node/node_modules/.bin"
    [[ -x "$bin/azurite-blob" && -x "$bin/s3rver" ]] || return 1
    [[ "$(_servers_npm_version azurite)" == "$SERVERS_AZURITE_VERSION" ]] || return 1
    [[ "$(_servers_npm_version s3rver)" == "$SERVERS_S3RVER_VERSION" ]] || return 1
}

_servers_install_moto() {
    local log="$SERVERS_TOOLS/pip.log" start=$SECONDS
    _servers_say "installing moto[server]==$SERVERS_MOTO_VERSION into .tools/venv (log: .tools/pip.log)"
    {
        echo "=== $(date -u +%FT%TZ) install moto[server]==$SERVERS_MOTO_VERSION"
        # A venv whose python no longer runs (python upgraded, folder moved) is rebuilt.
        if ! "$SERVERS_TOOLS/venv/bin/python" -c '' 2>/dev/null; then
            rm -rf "$SERVERS_TOOLS/venv"
            python3 -m venv "$SERVERS_TOOLS/venv" || exit 1
        fi
        "$SERVERS_TOOLS/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
            "moto[server]==$SERVERS_MOTO_VERSION"
    } >>"$log" 2>&1 </dev/null
    if ! _servers_moto_ok; then
        _servers_say "installing moto failed; end of .tools/pip.log:"
        tail -n 20 "$log" >&2
        return 1
    fi
    _servers_say "moto installed in $((SECONDS - start)) s"
}

_servers_install_node() {
    local log="$SERVERS_TOOLS/npm.log" start=$SECONDS
    _servers_say "installing azurite@$SERVERS_AZURITE_VERSION and s3rver@$SERVERS_S3RVER_VERSION into .tools/node (log: .tools/npm.log)"
    {
        echo "=== $(date -u +%FT%TZ) install azurite@$SERVERS_AZURITE_VERSION s3rver@$SERVERS_S3RVER_VERSION"
        npm install --prefix "$SERVERS_TOOLS/node" --no-audit --no-fund --no-update-notifier \
            --save-exact "azurite@$SERVERS_AZURITE_VERSION" "s3rver@$SERVERS_S3RVER_VERSION"
    } >>"$log" 2>&1 </dev/null
    if ! _servers_node_ok; then
        _servers_say "installing azurite/s3rver failed; end of .tools/npm.log:"
        tail -n 20 "$log" >&2
        return 1
    fi
    _servers_say "azurite and s3rver installed in $((SECONDS - start)) s"
}

servers_install() {
    _servers_need python3 || return 1
    mkdir -p "$SERVERS_TOOLS" || return 1
    if _servers_moto_ok && _servers_node_ok; then
        return 0
    fi
    _servers_need node npm || return 1
    # Two test runs at once must not install into the same folder together.
    local lock_fd="" rc=0
    if command -v flock >/dev/null 2>&1; then
        exec {lock_fd}>"$SERVERS_TOOLS/install.lock"
        flock "$lock_fd"
    fi
    _servers_moto_ok || _servers_install_moto || rc=1
    if ((rc == 0)); then
        _servers_node_ok || _servers_install_node || rc=1
    fi
    if [[ -n "$lock_fd" ]]; then
        exec {lock_fd}>&-
    fi
    return "$rc"
}

# Prints N distinct free loopback TCP ports (all held open until all are chosen).
_servers_free_ports() {
    python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# _servers_spawn NAME CMD...: starts CMD in a new session (its own process
# group), output to $SERVERS_DIR/NAME.log, and records its process group id.
_servers_spawn() {
    local name="$1" pidfile="$SERVERS_DIR/$1.pid" log="$SERVERS_DIR/$1.log"
    shift
    local launcher=(setsid)
    command -v setsid >/dev/null 2>&1 ||
        launcher=(python3 -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])')
    # The session leader writes its own pid (setsid may fork when the caller is
    # a process group leader, so $! is not always the server's pid). It runs in
    # $SERVERS_DIR so that nothing lands in the caller's folder.
    # shellcheck disable=SC2016
    "${launcher[@]}" bash -c 'cd "$1" && echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && shift && exec "$@"' \
        "$pidfile" "$SERVERS_DIR" "$@" </dev/null >"$log" 2>&1 &
    SERVERS_CHILDREN+=("$!")
    local waited=0
    while [[ ! -s "$pidfile" ]]; do
        if ((waited >= 100)); then
            _servers_say "$name did not start; end of its log:"
            tail -n 20 "$log" >&2
            return 1
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    SERVERS_NAMES+=("$name")
    SERVERS_PGIDS+=("$(<"$pidfile")")
}

# _servers_wait NAME PGID URL: waits until URL answers any HTTP status.
_servers_wait() {
    local name="$1" pgid="$2" url="$3" deadline=$((SECONDS + SERVERS_START_TIMEOUT)) code
    while :; do
        code="$(curl --noproxy '*' -s -o /dev/null -m 2 -w '%{http_code}' "$url" 2>/dev/null)" || true
        if [[ -n "$code" && "$code" != "000" ]]; then
            return 0
        fi
        if ! kill -0 -- "-$pgid" 2>/dev/null; then
            _servers_say "$name exited while starting; end of $SERVERS_DIR/$name.log:"
            tail -n 20 "$SERVERS_DIR/$name.log" >&2
            return 1
        fi
        if ((SECONDS >= deadline)); then
            _servers_say "$name did not answer at $url within ${SERVERS_START_TIMEOUT} s; end of its log:"
            tail -n 20 "$SERVERS_DIR/$name.log" >&2
            return 1
        fi
        sleep 0.2
    done
}

_servers_fail() {
    _servers_say "$*; stopping the servers started so far"
    servers_stop
    return 1
}

servers_start() {
    if [[ -n "$SERVERS_DIR" ]]; then
        _servers_say "servers already started (folder $SERVERS_DIR); call servers_stop first"
        return 1
    fi
    _servers_need python3 curl || return 1
    local bin="$SERVERS_TOOLS/node/node_modules/.bin"
    if [[ ! -x "$SERVERS_TOOLS/venv/bin/moto_server" || ! -x "$bin/azurite-blob" || ! -x "$bin/s3rver" ]]; then
        _servers_say "servers are not installed; run servers_install first"
        return 1
    fi
    SERVERS_DIR="$(mktemp -d "${TMPDIR:-/tmp}/concord-servers.XXXXXX")" || { SERVERS_DIR=""; return 1; }
    local ports moto_port azurite_port s3rver_port
    ports="$(_servers_free_ports 3)" || { _servers_fail "could not pick free ports"; return 1; }
    read -r moto_port azurite_port s3rver_port <<<"$ports"

    # Start all three, then wait for each: they boot in parallel.
    # moto_server, with its conditional writes atomic (see the script).
    _servers_spawn moto "$SERVERS_TOOLS/venv/bin/python" "$SERVERS_ROOT/scripts/moto_server.py" -H 127.0.0.1 -p "$moto_port" ||
        { _servers_fail "could not start moto"; return 1; }
    mkdir -p "$SERVERS_DIR/s3rver" || { _servers_fail "could not create $SERVERS_DIR/s3rver"; return 1; }
    _servers_spawn azurite "$bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$azurite_port" \
        --inMemoryPersistence --disableTelemetry \
        --skipApiVersionCheck --loose --silent ||
        { _servers_fail "could not start azurite"; return 1; }
    # The preload keeps s3rver alive when a delete and a PUT meet in one folder (see it).
    _servers_spawn s3rver node -r "$SERVERS_ROOT/scripts/s3rver_keep_folders.js" "$bin/s3rver" --directory "$SERVERS_DIR/s3rver" --address 127.0.0.1 \
        --port "$s3rver_port" --silent --configure-bucket "$SERVERS_BUCKET" ||
        { _servers_fail "could not start s3rver"; return 1; }

    local moto_url="http://127.0.0.1:$moto_port"
    local azurite_url="http://127.0.0.1:$azurite_port"
    local s3rver_url="http://127.0.0.1:$s3rver_port"
    _servers_wait moto "${SERVERS_PGIDS[0]}" "$moto_url/" || { _servers_fail "moto is not up"; return 1; }
    _servers_wait azurite "${SERVERS_PGIDS[1]}" "$azurite_url/" || { _servers_fail "azurite is not up"; return 1; }
    _servers_wait s3rver "${SERVERS_PGIDS[2]}" "$s3rver_url/" || { _servers_fail "s3rver is not up"; return 1; }

    local code
    code="$(curl --noproxy '*' -s -o "$SERVERS_DIR/moto-create.out" -m 30 -w '%{http_code}' \
        -X PUT "$moto_url/$SERVERS_BUCKET")" || code="000"
    if [[ "$code" != 200 ]]; then
        cat "$SERVERS_DIR/moto-create.out" >&2 2>/dev/null
        _servers_fail "creating bucket $SERVERS_BUCKET on moto answered HTTP $code"
        return 1
    fi
    python3 "$SERVERS_ROOT/scripts/azurite_create_container.py" "$azurite_url" "$SERVERS_BUCKET" ||
        { _servers_fail "creating container $SERVERS_BUCKET on azurite failed"; return 1; }
    code="$(curl --noproxy '*' -s -o "$SERVERS_DIR/s3rver-list.out" -m 30 -w '%{http_code}' \
        "$s3rver_url/$SERVERS_BUCKET")" || code="000"
    if [[ "$code" != 200 ]]; then
        cat "$SERVERS_DIR/s3rver-list.out" >&2 2>/dev/null
        _servers_fail "bucket $SERVERS_BUCKET on s3rver answered HTTP $code"
        return 1
    fi

    export CONCORD_TEST_S3_ENDPOINT="$moto_url"
    export CONCORD_TEST_AZURE_ENDPOINT="$azurite_url"
    export CONCORD_TEST_S3RVER_ENDPOINT="$s3rver_url"
    export CONCORD_TEST_BUCKET="$SERVERS_BUCKET"
    export CONCORD_REQUIRE_SERVERS=1
    _servers_say "moto $moto_url, azurite $azurite_url, s3rver $s3rver_url (logs in $SERVERS_DIR)"
}

servers_stop() {
    local pgids=("${SERVERS_PGIDS[@]}") f pgid i
    # A server that died during the run explains the tests that then failed: say so,
    # with the end of its log, before the logs go.
    for i in "${!SERVERS_NAMES[@]}"; do
        pgid="${SERVERS_PGIDS[$i]:-}"
        if [[ "$pgid" =~ ^[0-9]+$ ]] && ! kill -0 -- "-$pgid" 2>/dev/null; then
            _servers_say "${SERVERS_NAMES[$i]} had exited before the end of the run; end of its log:"
            tail -n 30 "$SERVERS_DIR/${SERVERS_NAMES[$i]}.log" >&2 2>/dev/null || true
        fi
    done
    # Also a server whose pid file was written but not yet recorded.
    if [[ -n "$SERVERS_DIR" && -d "$SERVERS_DIR" ]]; then
        for f in "$SERVERS_DIR"/*.pid; do
            [[ -s "$f" ]] && pgids+=("$(<"$f")")
        done
    fi
    for pgid in "${pgids[@]}"; do
        [[ "$pgid" =~ ^[0-9]+$ && "$pgid" -gt 1 ]] || continue
        kill -TERM -- "-$pgid" 2>/dev/null || true
    done
    local deadline=$((SECONDS + 10)) alive
    while :; do
        alive=()
        for pgid in "${pgids[@]}"; do
            [[ "$pgid" =~ ^[0-9]+$ && "$pgid" -gt 1 ]] || continue
            kill -0 -- "-$pgid" 2>/dev/null && alive+=("$pgid")
        done
        ((${#alive[@]} == 0)) && break
        if ((SECONDS >= deadline)); then
            for pgid in "${alive[@]}"; do
                kill -KILL -- "-$pgid" 2>/dev/null || true
            done
            sleep 0.2
            break
        fi
        sleep 0.1
    done
    # Reap our background jobs (quietly: they died of SIGTERM).
    local child
    for child in "${SERVERS_CHILDREN[@]}"; do
        wait "$child" 2>/dev/null || true
    done
    if [[ -n "$SERVERS_DIR" && "$SERVERS_DIR" == */concord-servers.* ]]; then
        rm -rf "$SERVERS_DIR"
    fi
    SERVERS_DIR=""
    SERVERS_NAMES=()
    SERVERS_PGIDS=()
    SERVERS_CHILDREN=()
    unset CONCORD_TEST_S3_ENDPOINT CONCORD_TEST_AZURE_ENDPOINT CONCORD_TEST_S3RVER_ENDPOINT \
        CONCORD_TEST_BUCKET CONCORD_REQUIRE_SERVERS
    return 0
}
