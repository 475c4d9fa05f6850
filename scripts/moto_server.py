"""moto's server (as `moto_server`), with its conditional writes made atomic.

moto checks a write's condition and then stores the write as two steps, and its server
handles requests on threads: two S3 PUTs with `If-None-Match: *` (or two DynamoDB
PutItems with `attribute_not_exists`) of one key at the same moment can both pass the
check, and both "succeed". Real S3 and DynamoDB never do that, and Concord's commits
rely on it: with 8 processes committing through moto's DynamoDB, CI saw a version
created twice and one acknowledged append replaced. Here each of those writes runs
under one lock, check and store together; everything else is moto as it is.
"""
import sys
import threading
from functools import wraps

from moto.dynamodb.models.table import Table
from moto.s3.responses import S3Response
from moto.server import main

_LOCK = threading.RLock()


def _atomic(method):
    @wraps(method)
    def locked(*args, **kwargs):
        with _LOCK:
            return method(*args, **kwargs)

    return locked


S3Response.put_object = _atomic(S3Response.put_object)
Table.put_item = _atomic(Table.put_item)

if __name__ == "__main__":
    sys.exit(main())
