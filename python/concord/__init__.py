"""Concord: versioned Arrow tables on object storage that many writers change at once, safely.

    >>> import concord, pyarrow as pa
    >>> t = concord.create("/tmp/t", "id bigint not null, name varchar")
    >>> t.append(pa.table({"id": [1, 2], "name": ["a", "b"]})).version
    1
    >>> t.to_arrow(where="id > 1").num_rows
    1

Tables live on local disk, in memory (``memory://``), S3, Azure Blob or GCS; any
number of threads, processes and machines can write one table at once, each commit
either applying as the concurrency contract says or failing with a typed exception
(see ``concord.ConcordError`` and its subclasses). The interface is
``shared/python-contract.md``; everything is done by the Rust library.
"""

from ._concord import __version__
from ._errors import (
    CommitStateUnknownError,
    ConcordError,
    CorruptError,
    IncompatibleError,
    InvalidInputError,
    StorageError,
    TableExistsError,
    TableNotFoundError,
    TooMuchContentionError,
    VersionMovedError,
)
from ._refs import BranchInfo, MergeInfo, TagInfo, Tags
from ._table import (
    DEFAULT_COMPACT_TARGET_ROWS,
    CommitInfo,
    Consumer,
    ConsumerInfo,
    Fragment,
    Table,
    create,
    create_coordinator_table,
    open,
    sql,
)
from ._together import commit_together

__all__ = [
    "create",
    "open",
    "sql",
    "create_coordinator_table",
    "commit_together",
    "Table",
    "CommitInfo",
    "Fragment",
    "Consumer",
    "ConsumerInfo",
    "Tags",
    "TagInfo",
    "BranchInfo",
    "MergeInfo",
    "ConcordError",
    "InvalidInputError",
    "IncompatibleError",
    "TooMuchContentionError",
    "VersionMovedError",
    "TableNotFoundError",
    "TableExistsError",
    "CommitStateUnknownError",
    "StorageError",
    "CorruptError",
    "DEFAULT_COMPACT_TARGET_ROWS",
    "__version__",
]
