#!/usr/bin/env python3
"""Multi-table commits and branch merges on S3 (moto behind a counting proxy), through
the concord CLI. Standard library only; scripts/bench-together starts the servers.

1. Latency and requests of one multi-table commit of N tables (N = 2, 8) beside one
   single-table commit and N separate commits: for each run, one append is staged in
   each table (untimed), then committed: `concord commit T0 ID0 T1=ID1 ... --together`
   (one process), or `concord commit Ti IDi` per table (one process each, one after
   the other). Each command is timed from spawn to exit (start-up and opening the
   tables included, as a user sees it); the proxy counts its requests. Medians.
2. W processes each committing pairs of tables: `concord stress --workload together`
   (commits/s, p50/p99, failed, half-applied), without and with --kill-rate.
3. A branch merge of M transactions: M appends on a branch (untimed), then
   `concord branch merge`, timed, its requests counted.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request


def env_for(endpoint):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CONCORD_"))}
    env.update(AWS_ENDPOINT_URL=endpoint, AWS_ALLOW_HTTP="true", AWS_REGION="us-east-1",
               AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_EC2_METADATA_DISABLED="true")
    return env


class Bench:
    def __init__(self, a):
        self.a = a
        self.direct = env_for(a.s3_endpoint)
        self.counted = env_for(a.proxy_endpoint)

    def run(self, args, counted=False, check=True):
        started = time.perf_counter()
        p = subprocess.run([self.a.concord, *args], capture_output=True, text=True, env=self.counted if counted else self.direct)
        elapsed = time.perf_counter() - started
        if check and p.returncode != 0:
            sys.exit(f"concord {' '.join(args)} failed ({p.returncode}): {p.stderr}")
        return p, elapsed

    def proxy(self, path, method="GET"):
        req = urllib.request.Request(f"{self.a.proxy_endpoint}/__bench__/{path}", method=method)
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read() or b"{}")

    def timed(self, commands):
        """Runs `commands` one after the other through the proxy: (seconds, requests by kind)."""
        self.proxy("reset", "POST")
        total = 0.0
        for args in commands:
            total += self.run(args, counted=True)[1]
        counts = self.proxy("counts")
        return total, {k: v for k, v in counts.items() if k not in ("requests",) and v}

    def bucket(self, name):
        req = urllib.request.Request(f"{self.a.s3_endpoint}/{name}", method="PUT")
        urllib.request.urlopen(req, timeout=60).read()
        return f"s3://{name}"

    def stage(self, uri, csv):
        return self.run(["append", uri, csv, "--stage"])[0].stdout.strip()


def median_counts(samples):
    kinds = sorted({k for s in samples for k in s})
    return {k: statistics.median(s.get(k, 0) for s in samples) for k in kinds}


def latency(b, a, csv):
    root = b.bucket("together-latency")
    tables = [f"{root}/t{i}" for i in range(max(a.tables))]
    for t in tables:
        b.run(["create", t, "--schema", "id bigint not null, val bigint not null"])
        b.run(["append", t, csv])
    out = {}
    for n in [1] + a.tables:
        rows = {"together": [], "separate": []}
        for _ in range(a.runs):
            ids = [b.stage(t, csv) for t in tables[:n]]
            if n == 1:
                rows["together"].append(b.timed([["commit", tables[0], ids[0]]]))
                continue
            pairs = [ids[0]] + [f"{t}={i}" for t, i in zip(tables[1:n], ids[1:])]
            rows["together"].append(b.timed([["commit", tables[0], *pairs, "--together"]]))
            ids = [b.stage(t, csv) for t in tables[:n]]
            rows["separate"].append(b.timed([["commit", t, i] for t, i in zip(tables[:n], ids)]))
        for kind, samples in rows.items():
            if samples:
                out[f"{kind}-{n}"] = {
                    "ms": statistics.median(s for s, _ in samples) * 1000,
                    "requests": median_counts([c for _, c in samples]),
                }
    return out


def stress(b, a, kill_rate):
    root = b.bucket(f"together-stress-{int(kill_rate * 100)}")
    p, _ = b.run(["stress", f"{root}/orders", "--workload", "together", "--writers", str(a.writers), "--ops", str(a.ops),
                  "--kill-rate", str(kill_rate)], check=False)
    r = json.loads(p.stdout)
    keys = ["verified", "commits", "failed", "unknown", "killed", "half_applied", "duplicated", "lost", "commits_per_s", "latency_ms",
            "elapsed_s", "failure_reasons", "problems"]
    return {k: r.get(k) for k in keys}


def single_stress(b, a):
    root = b.bucket("together-single")
    p, _ = b.run(["stress", f"{root}/t", "--writers", str(a.writers), "--ops", str(a.ops), "--mix", "append=1", "--rows", "2"], check=False)
    r = json.loads(p.stdout)
    return {k: r.get(k) for k in ["verified", "commits", "failed", "commits_per_s", "latency_ms"]}


def merge(b, a, csv):
    root = b.bucket("together-merge")
    t = f"{root}/t"
    b.run(["create", t, "--schema", "id bigint not null, val bigint not null"])
    b.run(["append", t, csv])
    b.run(["branch", "create", t, "dev"])
    started = time.perf_counter()
    for _ in range(a.merge_transactions):
        b.run(["--branch", "dev", "append", t, csv])
    writing = time.perf_counter() - started
    seconds, counts = b.timed([["branch", "merge", t, "dev", "--json"]])
    rows = int(b.run(["count", t])[0].stdout)
    return {"transactions": a.merge_transactions, "ms": seconds * 1000, "requests": counts, "rows_after": rows,
            "branch_appends_s": writing}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--concord", required=True)
    p.add_argument("--s3-endpoint", required=True)
    p.add_argument("--proxy-endpoint", required=True)
    p.add_argument("--tables", default="2,8")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--writers", type=int, default=16)
    p.add_argument("--ops", type=int, default=20)
    p.add_argument("--kill-rate", type=float, default=0.05)
    p.add_argument("--merge-transactions", type=int, default=1000)
    p.add_argument("--workloads", default="latency,stress,merge")
    p.add_argument("--workdir", required=True)
    a = p.parse_args()
    a.tables = [int(x) for x in a.tables.split(",")]
    b = Bench(a)
    csv = os.path.join(a.workdir, "rows.csv")
    with open(csv, "w") as f:
        f.write("id,val\n1,1\n2,2\n")
    result = {}
    workloads = a.workloads.split(",")
    if "latency" in workloads:
        result["latency"] = latency(b, a, csv)
        print(json.dumps({"latency": result["latency"]}), flush=True)
    if "stress" in workloads:
        result["stress"] = stress(b, a, 0.0)
        print(json.dumps({"stress": result["stress"]}), flush=True)
        result["stress_killed"] = stress(b, a, a.kill_rate)
        print(json.dumps({"stress_killed": result["stress_killed"]}), flush=True)
        result["single_table_stress"] = single_stress(b, a)
        print(json.dumps({"single_table_stress": result["single_table_stress"]}), flush=True)
    if "merge" in workloads:
        result["merge"] = merge(b, a, csv)
        print(json.dumps({"merge": result["merge"]}), flush=True)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
