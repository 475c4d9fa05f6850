"""The exceptions of the ``concord`` package: one class per exit code of the CLI.

Every error the library reports arrives as one of these, chosen by the error's type
(never by its message), exactly as the ``concord`` command chooses its exit code;
``exit_code`` says which. Messages are the CLI's. Each class is also a subclass of the
built-in exception a caller would naturally catch (``ValueError`` for bad input,
``FileNotFoundError`` for a missing table, ``OSError`` for storage failures).
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = [
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
]


class ConcordError(Exception):
    """Base class of every error the ``concord`` package raises.

    Raised as such only for failures that are bugs (a panic inside the library is
    caught and reported as ``ConcordError``, never as a crash).
    """

    #: The exit code of the ``concord`` CLI for the same failure.
    exit_code: int = 1

    def __init__(self, message: str = "", **attributes: Any) -> None:
        super().__init__(message)
        for name, value in attributes.items():
            setattr(self, name, value)

    @property
    def message(self) -> str:
        """The message (the CLI's message for the same failure)."""
        return str(self.args[0]) if self.args else ""

    def __str__(self) -> str:
        return self.message


class InvalidInputError(ConcordError, ValueError):
    """Bad usage or bad input: an unknown column, a value that does not fit its column,
    an unparsable predicate, a version that does not exist, ... Nothing was committed.
    CLI exit code 2."""

    exit_code = 2


class IncompatibleError(ConcordError):
    """A concurrent commit made this one impossible (it dropped a column this write
    uses, ...); retrying will not help. Nothing was committed. CLI exit code 3.

    Attributes:
        winner_version: the version of the concurrent commit (``None`` when the
            conflict is with another member of the same job commit).
        winner_operation: its operation (``None`` when not known: a re-run on the
            winners' changes failed, or a job member conflict).
        staged_id: in a job commit, the staged transaction that could not commit.
    """

    exit_code = 3
    winner_version: Optional[int] = None
    winner_operation: Optional[str] = None
    staged_id: Optional[str] = None


class TooMuchContentionError(ConcordError):
    """The retry budget (``max_retries``, ``timeout``) ran out while other writers kept
    winning. Nothing was committed; retrying later is safe. CLI exit code 4.

    Attributes:
        attempts: commit attempts made.
        elapsed_ms: time spent, in milliseconds.
    """

    exit_code = 4
    attempts: Optional[int] = None
    elapsed_ms: Optional[int] = None
    staged_id: Optional[str] = None


class VersionMovedError(ConcordError):
    """Compare-and-swap refused: ``expect_version`` was given and the table moved on.
    Nothing was committed. CLI exit code 5.

    Attributes:
        expected: the version given.
        latest: the table's latest version.
    """

    exit_code = 5
    expected: Optional[int] = None
    latest: Optional[int] = None
    staged_id: Optional[str] = None


class TableNotFoundError(ConcordError, FileNotFoundError):
    """No table at the location (or it was removed while in use). CLI exit code 7."""

    exit_code = 7


class TableExistsError(ConcordError, FileExistsError):
    """``create`` found a table already there (or a tag, branch or consumer of that name
    exists). CLI exit code 7."""

    exit_code = 7


class CommitStateUnknownError(ConcordError):
    """Storage stayed unreachable past the retry budget: the commit may or may not have
    landed. Retry with the same ``idempotency_key`` (never writes twice). CLI exit code 8.

    Attributes:
        version: the version the commit tried to create.
        transaction_id: the transaction's id (str; ``None`` for a table's creation).
    """

    exit_code = 8
    version: Optional[int] = None
    transaction_id: Optional[str] = None
    staged_id: Optional[str] = None


class StorageError(ConcordError, OSError):
    """A storage request failed (network, permissions, a store or coordinator that is
    not set up), or the table changed under the operation in a way that is not one of
    the other classes. The message names the object and the cause. CLI exit code 1."""

    exit_code = 1


class CorruptError(ConcordError, OSError):
    """An object of the table exists but its bytes do not decode. Other versions stay
    readable. CLI exit code 1."""

    exit_code = 1
