"""moto's server (as `moto_server`), with its conditional writes made atomic.

moto checks a write's condition and then stores the write as two steps, and its server
handles requests on threads: two S3 PUTs with `If-None-Match: *` (or two DynamoDB
PutItems with `attribute_not_exists`) of one key at the same moment can both pass the
check, and both "succeed". Real S3 and DynamoDB never do that, and Concord's commits
rely on it. Measured: 8 threads racing conditional PutItems on 60 keys (with Python's
thread switch interval at 1 us to make races show) created 2-4 keys twice on moto as
it is, none with this lock; a full test run under load once saw 160 acknowledged
appends through moto's DynamoDB leave 159 in the table, which this explains.
Here each of those writes runs under one lock, check and store together; everything
else is moto as it is.
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
