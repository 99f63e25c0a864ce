"""The two places the store's bytes live: a local folder, written atomically, and S3, reached with the credentials of
the environment.

A local file is written to a temporary name in its folder and renamed (:func:`write_atomically`); the temporary file
a killed write left is swept once stale. A write the disk refuses, and a store that cannot be reached, are one line
(:func:`write_refused`, :func:`access_refused`) that never shows a credential.
"""
from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from pipeline.core.config import Settings
from pipeline.core.errors import StoreError

#: Name prefix of a write in progress; one older than TEMP_MAX_AGE_S was left by a killed write and is swept.
TEMP_PREFIX, TEMP_MAX_AGE_S = ".tmp-", 600.0
#: Errors of a write that a retry cannot fix: reported as one line.
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)
#: How a refused write ends its message: the file written was removed (a caller that wrote others says more).
NOTHING_LEFT = "nothing was left half-written"


def write_atomically(target: Path, data: bytes, swept: set[Path]) -> str:
    """Write ``data`` to a temporary file beside ``target`` and rename it; the temporary file never stays. The
    folder's stale temporary files are swept first, once per folder in ``swept``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_temporary(target.parent, swept)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return str(target)


def sweep_temporary(folder: Path, swept: set[Path]) -> None:
    """Remove the ``.tmp-*`` files a killed write left in ``folder`` (older than :data:`TEMP_MAX_AGE_S`), unless
    ``folder`` is in ``swept`` already (it is added)."""
    if folder in swept:
        return
    swept.add(folder)
    cutoff = time.time() - TEMP_MAX_AGE_S
    for entry in os.scandir(folder):
        if entry.name.startswith(TEMP_PREFIX) and entry.is_file(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)


def write_refused(uri: str, exc: OSError) -> StoreError:
    """One line for a write the disk refused (full, read-only, no permission), naming the file."""
    reason = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
              errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
              errno.EPERM: "permission denied"}.get(exc.errno or 0, exc.strerror or str(exc))
    return StoreError(f"{uri}: cannot write ({reason}); {NOTHING_LEFT}")


def access_refused(root: str, endpoint_url: str, what: str, exc: OSError) -> StoreError:
    """One line for a store at ``root`` that cannot be used: what failed, the reason (no credential) and what to check."""
    reason = " ".join(redact(exc.strerror or str(exc)).split())
    reason = reason[reason.find("AWS Error "):] if "AWS Error " in reason else reason  # not pyarrow's preamble
    if root.startswith("s3://"):
        hint = (f"check that the bucket exists, that the endpoint {endpoint_url or '(AWS)'} is reachable "
                "and the AWS credentials in the environment")
    elif Path(root).exists() and not Path(root).is_dir():
        return StoreError(f"store {root}: it is a file, not a directory; pass a directory (--store or DEEPSENT_STORE)")
    else:
        hint = "check that it is a directory you may write to, under an existing, writable path"
    return StoreError(f"store {root}: {what} ({reason}); {hint} (--store or DEEPSENT_STORE)")


def s3_filesystem(endpoint_url: str, region: str) -> pafs.S3FileSystem:
    """pyarrow S3 filesystem; credentials are read by the AWS SDK from the environment."""
    kwargs: dict[str, Any] = {"region": region}
    if endpoint_url:
        scheme, _, host = endpoint_url.partition("://")
        if not host:
            scheme, host = "https", endpoint_url
        kwargs.update(endpoint_override=host.rstrip("/"), scheme=scheme)
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        kwargs.update(access_key=key, secret_key=secret, session_token=os.environ.get("AWS_SESSION_TOKEN"))
    return pafs.S3FileSystem(**kwargs)


def redact(text: str) -> str:
    """``text`` with the values of the AWS credential variables blanked out."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        secret = os.environ.get(name)
        if secret:
            text = text.replace(secret, "***")
    return text


def boto3_client(settings: Settings) -> Any:
    """A boto3 S3 client for the configured endpoint (credentials from the environment)."""
    import boto3

    return boto3.client("s3", endpoint_url=settings.s3_endpoint_url or None, region_name=settings.s3_region)
