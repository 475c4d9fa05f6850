#!/usr/bin/env python3
"""Lance (pylance) side of the peer benchmark.

  lance_writer.py create URI [--endpoint URL]          create the dataset (0 rows)
  lance_writer.py worker URI --writer N --appends K [--endpoint URL]
                                                       one writer process (protocol in common.py)
  lance_writer.py count  URI [--endpoint URL]          print {"rows": N, "versions": V}

Each append is `lance.write_dataset(table, URI, mode="append", storage_options=...)`,
100 rows, a fresh dataset handle each time (what independent writer processes do).
With --endpoint the URI is s3://bucket/prefix on an S3-compatible server (moto).
Lance commits a version on S3 with a conditional put (If-None-Match: *) of the
manifest and retries on conflict; no commit lock or extra option is needed.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def storage_options(endpoint):
    if not endpoint:
        return None
    return {
        "aws_endpoint": endpoint,
        "allow_http": "true",
        "aws_region": "us-east-1",
        "aws_access_key_id": "test",
        "aws_secret_access_key": "test",
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("action", choices=["create", "worker", "count"])
    p.add_argument("uri")
    p.add_argument("--endpoint")
    p.add_argument("--writer", type=int, default=0)
    p.add_argument("--appends", type=int, default=1)
    p.add_argument("--debug", action="store_true")
    args = p.parse_args()

    import lance

    opts = storage_options(args.endpoint)
    if args.action == "create":
        lance.write_dataset(common.arrow_table([]), args.uri, mode="create", storage_options=opts)
    elif args.action == "count":
        ds = lance.dataset(args.uri, storage_options=opts)
        print(json.dumps({"rows": ds.count_rows(), "versions": len(ds.versions())}))
    else:

        def prepare(index):
            return common.arrow_table(common.row_ids(args.writer, index))

        def append(_index, tbl):
            ds = lance.write_dataset(tbl, args.uri, mode="append", storage_options=opts)
            return {"version": ds.version}

        common.run_worker(args.writer, args.appends, prepare, append)


if __name__ == "__main__":
    main()
