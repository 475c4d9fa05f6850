#!/usr/bin/env python3
"""Prints the peer benchmark's results as markdown tables.

  report.py [RESULTS.json]      (default .tools/bench-peers.json)

Called by driver.py at the end of a run; runs on its own on a saved JSON file.
Standard library only.

The main table has one row per (store, writers, system):
  commits/s   successful appends / wall time of the workload (first append's start
              signal to the last append's return; concord stress: its own elapsed time)
  p50/p99/max latency of the successful appends, ms (nearest rank)
  attempts    mean/max commit attempts (Concord only)
  failures    appends that did not commit
  rows ok     final row count == initial + 100 x successful appends
  vs Lance / vs delta-rs (Concord rows only): Concord / peer for commits/s (> 1:
              Concord commits faster), p99 and max latency (< 1: Concord waits less)
"""
import json
import os
import sys

LABELS = {"concord-stress": "concord stress", "concord-cli": "concord cold CLI", "lance": "Lance", "delta": "delta-rs"}
PEERS = [("lance", "vs Lance"), ("delta", "vs delta-rs")]
KINDS = ["LIST", "GET", "HEAD", "PUT", "PUT_COND", "COPY", "DELETE", "POST", "OTHER"]


def num(v, digits=0):
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}x"


def ratios(run, peer):
    """commits/s, p99, max ratios of a Concord run against a peer run."""
    if peer is None:
        return "-"
    s, t = run["summary"], peer["summary"]
    return " / ".join([
        ratio(s.get("commits_per_s"), t.get("commits_per_s")),
        ratio(s["latency_ms"].get("p99"), t["latency_ms"].get("p99")),
        ratio(s["latency_ms"].get("max"), t["latency_ms"].get("max")),
    ])


def rows_ok(run):
    if "rows_final" not in run:
        return "?"
    mark = "yes" if run.get("rows_ok") else "NO"
    return f"{mark} ({run['rows_final']:,}/{run['rows_expected']:,})"


def main_table(results):
    out = []
    head = ["store", "W", "system", "commits/s", "p50 ms", "p99 ms", "max ms", "attempts mean/max", "failures", "rows ok"]
    head += [f"{label} (c/s, p99, max)" for _, label in PEERS]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join("---" if i < 3 else "---:" for i in range(len(head))) + "|")
    runs = results["runs"]
    by_key = {(r["store"], r["writers"], r["system"]): r for r in runs}
    for r in runs:
        s = r["summary"]
        lat = s.get("latency_ms") or {}
        att = s.get("attempts")
        concord = r["system"].startswith("concord")
        cells = [
            r["store"], str(r["writers"]), LABELS.get(r["system"], r["system"]),
            num(s.get("commits_per_s"), 2), num(lat.get("p50")), num(lat.get("p99")), num(lat.get("max")),
            f"{att['mean']:.2f} / {att['max']}" if concord and att else "-",
            f"{s.get('failed', 0)}/{s.get('appends', 0)}" + (" !" if r.get("problems") else ""),
            rows_ok(r),
        ]
        for peer, _ in PEERS:
            cells.append(ratios(r, by_key.get((r["store"], r["writers"], peer))) if concord else "-")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def requests_table(results):
    reqs = results.get("requests_per_append") or []
    if not reqs:
        return ""
    out = ["| system | " + " | ".join(KINDS) + " | total | latency ms |", "|---|" + "---:|" * (len(KINDS) + 2)]
    for q in reqs:
        if "counts" not in q:
            out.append(f"| {LABELS.get(q['system'], q['system'])} | {q.get('problem', '?')} |")
            continue
        c = q["counts"]
        out.append(f"| {LABELS.get(q['system'], q['system'])} | " + " | ".join(str(c.get(k, 0)) for k in KINDS)
                   + f" | {c.get('total', 0)} | {num(q.get('latency_ms'))} |")
    return "\n".join(out)


def problems(results):
    lines = []
    for r in results["runs"]:
        errors = {}
        for rec in r.get("records", []):
            if not rec.get("ok"):
                errors[rec.get("error", "?")] = errors.get(rec.get("error", "?"), 0) + 1
        for reason in (r.get("stress_report") or {}).get("failure_reasons", []):
            errors[reason["error"]] = errors.get(reason["error"], 0) + reason["count"]
        what = f"{r['store']} W={r['writers']} {LABELS.get(r['system'], r['system'])}"
        for p in r.get("problems", []):
            lines.append(f"- {what}: {p}")
        for e, n in sorted(errors.items(), key=lambda x: -x[1])[:3]:
            lines.append(f"- {what}: {n} x {e}")
    return "\n".join(lines)


def load_table(results):
    runs = [r for r in results["runs"] if r.get("load")]
    if not runs:
        return ""
    out = ["| store | W | system | moto, % of one core | machine, % of all CPUs |", "|---|---:|---|---:|---:|"]
    for r in runs:
        load = r["load"]
        busy = load.get("machine_busy")
        out.append(f"| {r['store']} | {r['writers']} | {LABELS.get(r['system'], r['system'])} | {num(100 * load['server_core'])} | "
                   f"{num(100 * busy) if busy is not None else '-'} |")
    return "\n".join(out)


def print_report(results, file=sys.stdout):
    m = results["meta"]
    print(f"\n## Concurrent appends: Concord vs Lance vs delta-rs ({m['date']})\n", file=file)
    print(f"{m['appends_per_writer']} appends of {m['rows_per_append']} rows per writer, W writer processes on one table; "
          f"{m['cpus']} CPUs; concord {m.get('concord') or '?'}, pylance {m.get('pylance')}, deltalake {m.get('deltalake')}, "
          f"pyarrow {m.get('pyarrow')}, moto {m.get('moto') or '?'}.", file=file)
    load = m.get("loadavg_1m_at_start")
    if load is not None:
        busy = " (other work was running: timings are skewed)" if load > (m.get("cpus") or 1) * 0.5 else ""
        print(f"Load average (1 min) when the benchmark started: {load:.1f}{busy}.", file=file)
    print(file=file)
    print(main_table(results), file=file)
    print("\nRatios are Concord / peer: commits/s (> 1: Concord faster), p99 and max latency (< 1: Concord waits less). "
          "`!`: the run had problems (listed below).", file=file)
    req = requests_table(results)
    if req:
        print("\n### Requests of one append (fresh process, S3 table with 11 versions)\n", file=file)
        print(req, file=file)
        print("\nLIST: bucket listings; PUT_COND: PUT with If-None-Match/If-Match; COPY: PUT with x-amz-copy-source.", file=file)
    load = load_table(results)
    if load:
        print("\n### CPU during each S3 workload, its writers' start to their end (moto serves on one core: near 100%, it was the limit)\n", file=file)
        print(load, file=file)
    prob = problems(results)
    if prob:
        print("\n### Failures and problems\n", file=file)
        print(prob, file=file)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", ".tools", "bench-peers.json")
    with open(path) as f:
        print_report(json.load(f))


if __name__ == "__main__":
    main()
