"""Multi-table transactions (FORMAT.md §18): staged transactions of several tables of one
store committed as one, all tables or none, with no server. Everything is done by the
library's ``commit_together`` (through ``concord._concord``)."""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Tuple, Union

from . import _concord
from ._table import CommitInfo, Table, _info

__all__ = ["commit_together"]


def commit_together(
    parts: Iterable[Tuple[Table, Union[str, Sequence[str]]]], idempotency_key: Optional[str] = None
) -> List[List[CommitInfo]]:
    """Commits each table's staged transactions (``parts``: ``(table, staged_ids)`` pairs,
    ids from ``stage_*`` on that table) as one transaction: every table moves by one
    version holding its transactions in the order given, or none moves, and no reader
    sees one table's part without the others'.

    Every table must be in one store (one bucket, container or filesystem) and given
    once; otherwise ``InvalidInputError`` and nothing is committed. A part that cannot
    commit (incompatible with what landed meanwhile, ...) raises that part's error and
    nothing counts. A retry under the same ``idempotency_key`` commits nothing again and
    returns what was committed (``idempotent_replay`` True). Returns each table's
    ``CommitInfo`` list, in ``parts``' order; each handle then reads the version it
    committed.
    """
    pairs = []
    for part in parts:
        table, ids = part
        if not isinstance(table, Table):
            raise TypeError(f"commit_together takes (concord.Table, staged ids) pairs, not {type(table).__name__}")
        pairs.append((table._native, [ids] if isinstance(ids, str) else [str(i) for i in ids]))
    return [[_info(d) for d in infos] for infos in _concord.commit_together(pairs, idempotency_key)]
