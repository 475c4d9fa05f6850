#!/usr/bin/env python3
"""Runs the peer benchmark's workloads and writes the raw results; started by
scripts/bench-peers (which installs the tools, builds concord, starts moto and the
counting proxy, and stops them). See scripts/bench-peers for what is measured.

For each store (local disk, moto S3), each writer count W and each system, one after
the other, on a fresh table:
  concord-stress  `concord stress URI --writers W --ops K --mix append=1 --rows 100`
                  (writer processes of the concord binary, one table handle each;
                  its JSON report gives commits/s, latency percentiles and attempts)
  concord-cli     W worker processes, each running `concord append URI FILE.csv`
                  K times, one concord process per append (concord_cli_writer.py)
  lance           W worker processes, each calling lance.write_dataset K times
  delta           W worker processes, each calling deltalake.write_deltalake K times
then counts the rows (initial + 100 per successful append expected). Afterwards,
with the counting proxy, it counts the requests of one append by a fresh process
(concord append, Lance, delta) to a table that already has 11 versions.

Raw results (every append's latency and outcome) go to --out as JSON; the tables
are printed by report.py.
"""
import argparse
import datetime
import json
import os
import platform
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
import report  # noqa: E402

SYSTEMS = ["concord-stress", "concord-cli", "lance", "delta"]
PEER_SCRIPTS = {"lance": "lance_writer.py", "delta": "delta_writer.py"}
READY_TIMEOUT_S = 300  # workers importing pyarrow/lance on a busy 2-core machine
REQUEST_TABLE_VERSIONS = 10  # appends before the counted one

live = set()  # Popen objects still running; killed on the way out
pgid_file = None  # where the groups we start are recorded, for scripts/bench-peers' trap


def say(msg):
    print(f"bench-peers: {msg}", file=sys.stderr, flush=True)


def kill_all():
    for proc in list(live):
        if proc.poll() is None:
            try:
                if getattr(proc, "own_group", False):
                    os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        live.discard(proc)


def spawn(cmd, own_group=False, **kw):
    proc = subprocess.Popen(cmd, start_new_session=own_group, **kw)
    proc.own_group = own_group
    if own_group and pgid_file:
        with open(pgid_file, "a") as f:
            f.write(f"{proc.pid}\n")
    live.add(proc)
    return proc


def finish(proc, timeout):
    """Waits for proc; kills it (and its group) past timeout. Returns its exit code or None."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    finally:
        if proc.poll() is None:
            kill_all_of(proc)
        live.discard(proc)


def kill_all_of(proc):
    try:
        if proc.own_group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()


class Context:
    """Everything a run needs to know about the environment."""

    def __init__(self, args):
        self.args = args
        self.python = sys.executable
        self.workdir = args.work_dir
        os.makedirs(os.path.join(self.workdir, "logs"), exist_ok=True)

    def clean_env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CONCORD_"))}
        env["AWS_EC2_METADATA_DISABLED"] = "true"
        return env

    def concord_env(self, endpoint):
        env = self.clean_env()
        if endpoint:
            env.update(
                AWS_ENDPOINT_URL=endpoint,
                AWS_ALLOW_HTTP="true",
                AWS_REGION="us-east-1",
                AWS_ACCESS_KEY_ID="test",
                AWS_SECRET_ACCESS_KEY="test",
            )
        return env

    def log(self, name):
        return open(os.path.join(self.workdir, "logs", name), "ab")


def make_bucket(endpoint, name):
    req = urllib.request.Request(f"{endpoint}/{name}", method="PUT")
    with urllib.request.urlopen(req, timeout=60) as r:
        if r.status != 200:
            raise RuntimeError(f"creating bucket {name}: HTTP {r.status}")


def table_uri(ctx, store, system, writers, tag="bench"):
    if store == "local":
        return os.path.join(ctx.workdir, "tables", f"{tag}-{system}-w{writers}")
    bucket = f"{tag}-{system}-w{writers}"  # one bucket per table: moto lists a bucket's keys
    make_bucket(ctx.args.s3_endpoint, bucket)
    return f"s3://{bucket}/t"


def run_checked(cmd, env, log, timeout=600):
    """Runs a setup/count command; returns its stdout or raises with its stderr."""
    proc = spawn(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_all_of(proc)
        raise RuntimeError(f"{' '.join(cmd[:3])} ... did not finish in {timeout} s")
    finally:
        live.discard(proc)
    log.write(err)
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"{' '.join(map(str, cmd[:3]))} ... exited {proc.returncode}: {' | '.join(tail)}")
    return out.decode()


# --- table setup and row counts, per system -------------------------------------------

def create_table(ctx, system, uri, endpoint, log):
    if system.startswith("concord"):
        run_checked([ctx.args.concord, "create", uri, "--schema", common.SCHEMA_SQL], ctx.concord_env(endpoint), log)
    else:
        cmd = [ctx.python, os.path.join(HERE, PEER_SCRIPTS[system]), "create", uri]
        run_checked(cmd + (["--endpoint", endpoint] if endpoint else []), ctx.clean_env(), log)


def count_rows(ctx, system, uri, endpoint, log):
    if system.startswith("concord"):
        return int(run_checked([ctx.args.concord, "count", uri], ctx.concord_env(endpoint), log).strip())
    cmd = [ctx.python, os.path.join(HERE, PEER_SCRIPTS[system]), "count", uri]
    out = run_checked(cmd + (["--endpoint", endpoint] if endpoint else []), ctx.clean_env(), log)
    return json.loads(out)["rows"]


def worker_cmd(ctx, system, uri, endpoint, writer, appends, csv_dir):
    if system == "concord-cli":
        return [ctx.python, os.path.join(HERE, "concord_cli_writer.py"), "--concord", ctx.args.concord,
                "--uri", uri, "--writer", str(writer), "--appends", str(appends), "--csv-dir", csv_dir]
    cmd = [ctx.python, os.path.join(HERE, PEER_SCRIPTS[system]), "worker", uri,
           "--writer", str(writer), "--appends", str(appends)]
    return cmd + (["--endpoint", endpoint] if endpoint else [])


# --- running W worker processes in lockstep ------------------------------------------

def run_workers(ctx, cmds, env, log_name, timeout):
    """Starts the workers, waits until all are ready, says go, collects their
    records. Returns (records, wall_s, problems)."""
    lines = queue.Queue()
    procs = []
    problems = []

    def reader(i, stream):
        for raw in stream:
            lines.put((i, raw.decode(errors="replace").strip()))
        lines.put((i, None))

    log = ctx.log(log_name)
    for i, cmd in enumerate(cmds):
        proc = spawn(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        procs.append(proc)
        threading.Thread(target=reader, args=(i, proc.stdout), daemon=True).start()

    records, ready, ended = [], set(), set()

    def take(deadline):
        try:
            i, line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return False
        if line is None:
            ended.add(i)
        elif line == '"ready"':
            ready.add(i)
        elif line:
            try:
                records.append(json.loads(line))
            except ValueError:
                problems.append(f"worker {i}: unexpected output {line[:200]!r}")
        return True

    deadline = time.monotonic() + READY_TIMEOUT_S
    while len(ready) < len(procs) and not (ended - ready) and time.monotonic() < deadline:
        take(deadline)
    go = time.monotonic()
    if len(ready) == len(procs):
        for proc in procs:
            proc.stdin.write(b"go\n")
            proc.stdin.close()
        deadline = go + timeout
        while len(ended) < len(procs) and time.monotonic() < deadline:
            take(deadline)
        if len(ended) < len(procs):
            problems.append(f"timed out after {timeout} s; workers killed")
    else:
        problems.append(f"a worker exited or hung before it was ready (see logs/{log_name})")
    all_ready = len(ready) == len(procs)
    for proc in procs:
        if not all_ready:
            proc.stdin.close()
        finish(proc, timeout=30 if all_ready else 0)
    while not lines.empty():  # lines read before the kill
        take(time.monotonic())
    for i, proc in enumerate(procs):
        if proc.returncode not in (0, None):
            problems.append(f"worker {i} exited with {proc.returncode}")
    log.close()
    ends = [r["end"] for r in records if "end" in r]
    wall = (max(ends) - go) if ends else None
    return records, wall, problems


# --- one workload --------------------------------------------------------------------

def run_one(ctx, store, writers, system):
    a = ctx.args
    endpoint = a.s3_endpoint if store == "s3" else None
    name = f"{store}-w{writers}-{system}"
    log = ctx.log(f"{name}.log")
    result = {"store": store, "writers": writers, "appends_per_writer": a.appends,
              "rows_per_append": common.ROWS_PER_APPEND, "system": system, "problems": [],
              "loadavg_1m_before": round(os.getloadavg()[0], 2)}  # other work on the machine skews timings
    try:
        uri = table_uri(ctx, store, system, writers)
        result["uri"] = uri
        create_table(ctx, system, uri, endpoint, log)
        result["rows_initial"] = count_rows(ctx, system, uri, endpoint, log)
        # moto's CPU and the machine's from the writers' start to their end: was the
        # server the limit?
        server_pid = a.moto_pid if store == "s3" else None
        before, started = common.cpu_snapshot(server_pid) if server_pid else None, time.monotonic()
        if system == "concord-stress":
            cmd = [a.concord, "stress", uri, "--writers", str(writers), "--ops", str(a.appends),
                   "--mix", "append=1", "--rows", str(common.ROWS_PER_APPEND)]
            proc = spawn(cmd, own_group=True, env=ctx.concord_env(endpoint),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
            try:
                out, _ = proc.communicate(timeout=a.run_timeout)
            except subprocess.TimeoutExpired:
                kill_all_of(proc)
                out = b""
                result["problems"].append(f"stress timed out after {a.run_timeout} s")
            finally:
                live.discard(proc)
            rep = None
            for line in out.decode(errors="replace").splitlines():
                if line.startswith("{"):
                    rep = json.loads(line)
            if rep is None:
                result["problems"].append(f"stress exited {proc.returncode} without a report (see logs/{name}.log)")
                result["summary"] = common.summarize([], None)
            else:
                result["stress_report"] = rep
                if not rep.get("verified"):
                    result["problems"].append(f"stress did not verify: {rep.get('problems')}")
                result["summary"] = {
                    "appends": writers * a.appends, "commits": rep["commits"], "failed": writers * a.appends - rep["commits"],
                    "wall_s": rep["elapsed_s"], "commits_per_s": rep["commits_per_s"], "latency_ms": rep["latency_ms"],
                    "attempts": rep["attempts"],
                }
        else:
            csv_dir = os.path.join(ctx.workdir, "csv", name)
            os.makedirs(csv_dir, exist_ok=True)
            env = ctx.concord_env(endpoint) if system == "concord-cli" else ctx.clean_env()
            cmds = [worker_cmd(ctx, system, uri, endpoint, w, a.appends, csv_dir) for w in range(writers)]
            records, wall, problems = run_workers(ctx, cmds, env, f"{name}.log", a.run_timeout)
            result["problems"] += problems
            # Appends a killed or crashed worker never reported count as failures.
            seen = {(r["writer"], r["index"]) for r in records}
            for w in range(writers):
                for i in range(a.appends):
                    if (w, i) not in seen:
                        records.append({"writer": w, "index": i, "ok": False, "latency_ms": None, "error": "not run (worker died or timed out)"})
            records.sort(key=lambda r: (r["writer"], r["index"]))
            result["records"] = records
            result["summary"] = common.summarize(records, wall)
        if server_pid:
            result["load"] = common.load_between(before, common.cpu_snapshot(server_pid), time.monotonic() - started)
        s = result["summary"]
        result["rows_final"] = count_rows(ctx, system, uri, endpoint, log)
        result["rows_expected"] = result["rows_initial"] + s["commits"] * common.ROWS_PER_APPEND
        result["rows_ok"] = result["rows_final"] == result["rows_expected"]
    except Exception as e:  # a broken run is reported, the benchmark goes on
        result["problems"].append(common.short_error(e))
        result.setdefault("summary", common.summarize([], None))
    finally:
        log.close()
    s = result["summary"]
    cps = s.get("commits_per_s")
    say(f"[{store} W={writers}] {system}: {s['commits']}/{writers * a.appends} ok, "
        f"{cps:.2f} commits/s" if cps is not None else f"[{store} W={writers}] {system}: no result")
    for p in result["problems"]:
        say(f"  problem: {p}")
    return result


# --- requests per commit -------------------------------------------------------------

def proxy_call(path, method="GET"):
    req = urllib.request.Request(f"{path}", method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"{}")


def count_requests(ctx, system):
    """Requests of one append (by a fresh process) to an S3 table that has
    REQUEST_TABLE_VERSIONS appends already."""
    a = ctx.args
    name = f"requests-{system}"
    log = ctx.log(f"{name}.log")
    out = {"system": system}
    try:
        uri = table_uri(ctx, "s3", system, 1, tag="reqs")
        create_table(ctx, system, uri, a.s3_endpoint, log)
        csv_dir = os.path.join(ctx.workdir, "csv", name)
        os.makedirs(csv_dir, exist_ok=True)
        env_direct = ctx.concord_env(a.s3_endpoint) if system == "concord-cli" else ctx.clean_env()
        recs, _, problems = run_workers(ctx, [worker_cmd(ctx, system, uri, a.s3_endpoint, 0, REQUEST_TABLE_VERSIONS, csv_dir)],
                                        env_direct, f"{name}.log", a.run_timeout)
        if problems or not all(r["ok"] for r in recs):
            raise RuntimeError(f"preparing the table failed: {problems or [r.get('error') for r in recs if not r['ok']]}")
        env_proxy = ctx.concord_env(a.proxy_endpoint) if system == "concord-cli" else ctx.clean_env()
        cmd = worker_cmd(ctx, system, uri, a.proxy_endpoint, 1, 1, csv_dir)
        proxy_call(f"{a.proxy_endpoint}/__bench__/reset", "POST")
        recs, _, problems = run_workers(ctx, [cmd], env_proxy, f"{name}.log", a.run_timeout)
        counts = proxy_call(f"{a.proxy_endpoint}/__bench__/counts")
        if problems or len(recs) != 1 or not recs[0]["ok"]:
            raise RuntimeError(f"the counted append failed: {problems or recs}")
        out["versions_before"] = REQUEST_TABLE_VERSIONS + 1
        out["latency_ms"] = recs[0]["latency_ms"]
        out["requests"] = counts.pop("requests")
        out["counts"] = counts
    except Exception as e:
        out["problem"] = common.short_error(e)
        say(f"requests of {system}: {out['problem']}")
    finally:
        log.close()
    return out


# --- main ----------------------------------------------------------------------------

def versions():
    v = {"python": platform.python_version()}
    for mod, dist in (("pyarrow", "pyarrow"), ("lance", "pylance"), ("deltalake", "deltalake")):
        try:
            from importlib.metadata import version

            v[dist] = version(dist)
        except Exception:
            v[dist] = None
    return v


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--concord", required=True, help="the concord binary")
    p.add_argument("--work-dir", required=True, help="temporary folder: local tables, CSVs, logs")
    p.add_argument("--s3-endpoint", help="moto (needed for the s3 store)")
    p.add_argument("--proxy-endpoint", help="counting proxy in front of moto (requests per commit)")
    p.add_argument("--moto-pid", type=int, help="moto's process: its CPU during each S3 workload is reported")
    p.add_argument("--stores", default="local,s3")
    p.add_argument("--writers", default="1,4,8,16")
    p.add_argument("--appends", type=int, default=20)
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--run-timeout", type=int, default=1800, help="seconds per workload")
    p.add_argument("--out", required=True)
    p.add_argument("--concord-version", default="")
    p.add_argument("--moto-version", default="")
    args = p.parse_args()

    stores = [s for s in args.stores.split(",") if s]
    writers = [int(w) for w in args.writers.split(",") if w]
    systems = [s for s in args.systems.split(",") if s]
    for s in systems:
        if s not in SYSTEMS:
            p.error(f"unknown system {s}; use {','.join(SYSTEMS)}")
    if "s3" in stores and not args.s3_endpoint:
        p.error("the s3 store needs --s3-endpoint")

    # SIGTERM (from scripts/bench-peers' trap) ends the run like Ctrl-C: workers killed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ctx = Context(args)
    global pgid_file
    pgid_file = os.path.join(args.work_dir, "pgids")
    results = {
        "meta": {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cpus": os.cpu_count(), "platform": platform.platform(), "loadavg_1m_at_start": round(os.getloadavg()[0], 2),
            "concord": args.concord_version, "moto": args.moto_version, **versions(),
            "stores": stores, "writers": writers, "appends_per_writer": args.appends,
            "rows_per_append": common.ROWS_PER_APPEND, "systems": systems,
        },
        "runs": [],
        "requests_per_append": [],
    }

    def save():
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f, indent=1)
        os.replace(tmp, args.out)

    try:
        for store in stores:
            for w in writers:
                for system in systems:
                    results["runs"].append(run_one(ctx, store, w, system))
                    save()
        if args.proxy_endpoint:
            for system in [s for s in systems if s != "concord-stress"]:
                say(f"counting the requests of one {system} append")
                results["requests_per_append"].append(count_requests(ctx, system))
                save()
    finally:
        kill_all()
        save()
    report.print_report(results)
    say(f"raw results: {args.out}")


if __name__ == "__main__":
    main()
