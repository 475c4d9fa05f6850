#!/usr/bin/env python3
"""Concord "cold CLI" writer of the peer benchmark: one writer process that runs
`concord append URI FILE.csv --json` K times, one new `concord` process per append,
and times each process from spawn to exit (so the latency includes process start,
opening the table and the commit: what a shell script or cron job pays).

  concord_cli_writer.py --concord BIN --uri URI --writer N --appends K --csv-dir DIR

Each append's 100-row CSV (header `id,val`) is written to DIR before `go`. The store
settings come from the environment (AWS_ENDPOINT_URL, AWS_ALLOW_HTTP, ...), which the
driver sets for S3. Attempts and version come from the `--json` outcome; a non-zero
exit is recorded as a failure with its exit code and last line of stderr.
Protocol with the driver: common.py.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--concord", required=True)
    p.add_argument("--uri", required=True)
    p.add_argument("--writer", type=int, required=True)
    p.add_argument("--appends", type=int, required=True)
    p.add_argument("--csv-dir", required=True)
    args = p.parse_args()

    def prepare(index):
        path = os.path.join(args.csv_dir, f"w{args.writer}-a{index}.csv")
        with open(path, "w") as f:
            f.write("id,val\n")
            f.writelines(f"{i},0\n" for i in common.row_ids(args.writer, index))
        return path

    def append(_index, path):
        proc = subprocess.run([args.concord, "append", args.uri, path, "--json"], capture_output=True, text=True)
        if proc.returncode != 0:
            lines = [line for line in proc.stderr.splitlines() if line.strip()]
            raise RuntimeError(f"exit {proc.returncode}: {lines[-1] if lines else '(no message)'}")
        outcome = json.loads(proc.stdout)
        return {"attempts": outcome.get("attempts"), "version": outcome.get("version")}

    common.run_worker(args.writer, args.appends, prepare, append)


if __name__ == "__main__":
    main()
