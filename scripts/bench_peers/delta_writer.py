#!/usr/bin/env python3
"""delta-rs (deltalake) side of the peer benchmark.

  delta_writer.py create URI [--endpoint URL]          create the table (0 rows)
  delta_writer.py worker URI --writer N --appends K [--endpoint URL]
                                                       one writer process (protocol in common.py)
  delta_writer.py count  URI [--endpoint URL]          print {"rows": N, "versions": V}

Each append is `write_deltalake(URI, table, mode="append", storage_options=...)`,
100 rows, loading the table afresh each time (what independent writer processes do).
With --endpoint the URI is s3://bucket/prefix on an S3-compatible server (moto).
Safe concurrent commits on S3: delta-rs 1.x writes each `_delta_log/N.json` with a
conditional put (If-None-Match: *) when `conditional_put=etag` (object_store's
option; delta-rs 1.x no longer has the DynamoDB locking provider). We set it
explicitly so that a changed default cannot make the benchmark unsafe; the request
count of scripts/bench-peers shows the conditional PUT.
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
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "conditional_put": "etag",
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

    from deltalake import DeltaTable, write_deltalake

    opts = storage_options(args.endpoint)
    if args.action == "create":
        DeltaTable.create(args.uri, schema=common.arrow_schema(), mode="error", storage_options=opts)
    elif args.action == "count":
        dt = DeltaTable(args.uri, storage_options=opts)
        print(json.dumps({"rows": dt.to_pyarrow_dataset().count_rows(), "versions": dt.version() + 1}))
    else:

        def prepare(index):
            return common.arrow_table(common.row_ids(args.writer, index))

        def append(_index, tbl):
            write_deltalake(args.uri, tbl, mode="append", storage_options=opts)

        common.run_worker(args.writer, args.appends, prepare, append)


if __name__ == "__main__":
    main()
