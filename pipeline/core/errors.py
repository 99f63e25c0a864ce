"""Errors that users see: each names the file, the row (when there is one) and the reason."""
from __future__ import annotations


class DeepsentError(Exception):
    """A failure the CLI reports as one clear line instead of a traceback."""


class InputError(DeepsentError):
    """Bad input data: names the file, the row/line (1-based) when known, and the reason."""

    def __init__(self, path: str, reason: str, row: int | None = None) -> None:
        self.path = str(path)
        self.row = row
        self.reason = reason
        where = f"{self.path}, row {row}" if row is not None else self.path
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[type, tuple[str, str, int | None]]:
        """Pickle by the constructor's arguments (a Dask worker's error reaches the client whole)."""
        return (type(self), (self.path, self.reason, self.row))


class ConfigError(DeepsentError):
    """A bad setting, flag or parameter."""


class StoreError(DeepsentError):
    """The store cannot be used: names the store, what failed and what to check (never a credential)."""
