"""Tags and branches: names of versions, and chains of versions of their own that share
the table's files and merge back (FORMAT.md §17), as the CLI's ``tag`` and ``branch``
commands and ``--branch``.

``Table`` gets ``tags``, ``branch``, ``branch_name``, ``create_branch``, ``branches``,
``delete_branch`` and ``merge_branch`` from ``RefsMixin``; everything is done by the
library (through ``concord._concord``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union

from . import _concord

if TYPE_CHECKING:
    from ._table import Table

__all__ = ["BranchInfo", "MergeInfo", "RefsMixin", "TagInfo", "Tags", "VersionLike", "MAIN_BRANCH"]

#: A version as reads, ``restore``, ``changes`` and consumers take it: a number, or a
#: tag's name (a str of digits is a number).
VersionLike = Union[int, str]

#: The table's own chain of versions.
MAIN_BRANCH = "main"


class TagInfo(NamedTuple):
    """A tag: ``name`` names ``version`` of ``branch``."""

    name: str
    version: int
    branch: str
    #: When it was made (RFC 3339, UTC).
    created_at: str


class BranchInfo(NamedTuple):
    """A branch: made from ``from_branch`` at its version ``from_version`` (both
    ``None`` for ``main``)."""

    name: str
    from_branch: Optional[str]
    from_version: Optional[int]
    #: When it was made (RFC 3339, UTC; ``None`` for ``main``).
    created_at: Optional[str]


@dataclass(frozen=True)
class MergeInfo:
    """What ``merge_branch`` did.

    Attributes:
        branch: the branch merged.
        into: the branch it was merged into.
        version: the version of ``into`` holding the merged transactions (``None``:
            nothing was left to merge).
        transactions: transactions merged.
        branch_versions: the branch's versions merged, first and last (``None``: none).
    """

    branch: str
    into: str
    version: Optional[int]
    transactions: int
    branch_versions: Optional[Tuple[int, int]]

    def to_dict(self) -> Dict[str, Any]:
        """As ``concord branch merge --json`` prints it."""
        return {
            "branch": self.branch,
            "into": self.into,
            "version": self.version,
            "branch_versions": list(self.branch_versions) if self.branch_versions else None,
            "transactions": self.transactions,
        }


class Tags:
    """A table's tags (``Table.tags``): names of versions, kept by vacuum. A tag names a
    version of the branch of the handle that made it; ``version=`` takes its name
    wherever a version number is taken."""

    __slots__ = ("_table",)

    def __init__(self, table: "Table") -> None:
        self._table = table

    def create(self, name: str, version: Optional[VersionLike] = None) -> TagInfo:
        """Tags ``version`` (a number or another tag's name; the latest without) of the
        handle's branch as ``name``. A name in use raises ``TableExistsError``; a
        version not retained, or a name that is not usable (letters, digits, ``-``,
        ``_``, ``.``; not only digits), ``InvalidInputError``."""
        return TagInfo(*_concord.create_tag(self._table._native, name, version))

    def delete(self, name: str) -> TagInfo:
        """Deletes tag ``name`` (vacuum no longer keeps its version for it); returns what
        it named. An unknown tag raises ``InvalidInputError``."""
        return TagInfo(*_concord.tag(self._table._native, name, True))

    def get(self, name: str) -> TagInfo:
        """Tag ``name`` (``InvalidInputError`` if there is none)."""
        return TagInfo(*_concord.tag(self._table._native, name, False))

    def list(self) -> List[TagInfo]:
        """Every tag, by name."""
        return [TagInfo(*t) for t in _concord.tags(self._table._native)]

    def __iter__(self) -> Iterator[TagInfo]:
        return iter(self.list())

    def __repr__(self) -> str:
        return f"concord.Tags({self._table.uri!r})"


class RefsMixin:
    """The tag and branch methods of ``concord.Table``."""

    __slots__ = ()
    _native: Any
    _storage_options: Any

    @property
    def tags(self) -> Tags:
        """The table's tags: ``t.tags.create(name, version=None)``, ``.delete(name)``,
        ``.list()``, ``.get(name)``."""
        return Tags(self)  # type: ignore[arg-type]

    @property
    def branch_name(self) -> str:
        """The branch this handle reads and writes (``"main"``: the table's own chain)."""
        return self._native.branch_name

    def _handle(self, native: Any) -> "Table":
        return type(self)(native, self._storage_options)  # type: ignore[call-arg, return-value]

    def branch(self, name: str) -> "Table":
        """A handle on branch ``name`` at its latest version (``"main"``: the table's own
        chain). Writes through it commit on that branch only; it pickles and survives
        ``fork`` on that branch. An unknown branch raises ``InvalidInputError``."""
        return self._handle(_concord.branch(self._native, name))

    def create_branch(self, name: str, from_version: Optional[VersionLike] = None) -> "Table":
        """Makes branch ``name`` from ``from_version`` of this handle's branch (a number,
        or a tag's name wherever the tag is; the latest without) and returns a handle on
        it. No file is copied. A name in use raises ``TableExistsError``."""
        return self._handle(_concord.create_branch(self._native, name, from_version))

    def branches(self) -> List[BranchInfo]:
        """Every branch, ``main`` first, then by name."""
        return [BranchInfo(*b) for b in _concord.branches(self._native)]

    def delete_branch(self, name: str) -> BranchInfo:
        """Deletes branch ``name``: its chain ends (a handle still on it fails to write,
        with ``IncompatibleError``) and its name goes; what only it references is
        vacuum's. Returns what it was."""
        return BranchInfo(*_concord.delete_branch(self._native, name))

    def merge_branch(self, name: str, into: str = MAIN_BRANCH, fast_forward_only: bool = False) -> MergeInfo:
        """Replays branch ``name``'s transactions not merged yet onto ``into`` (the
        branch it was made from) as one version, all or none; rows keep their row ids.
        A transaction incompatible with what ``into`` did since raises
        ``IncompatibleError``; with ``fast_forward_only``, a target with versions of its
        own since the branch started (or was last merged) raises ``VersionMovedError``.
        A handle on ``into`` then reads the merged version."""
        d = _concord.merge_branch(self._native, name, into, fast_forward_only)
        versions = d["branch_versions"]
        return MergeInfo(d["branch"], d["into"], d["version"], d["transactions"], tuple(versions) if versions else None)
