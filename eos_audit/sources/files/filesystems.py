"""Kafka's own files wherever they are: local paths through `os`, object stores through pyarrow.fs.

Segments, snapshots, checkpoints and dump-log text are listed on the driver and read on the
executors by eos-audit's own readers (`file_source`), not by Spark's. A local path (a mounted
volume included) is listed and opened exactly as before, with `os`; a URI of an object store or
HDFS (`s3://`, `s3a://`, `gs://`, `abfss://`, `hdfs://`...) goes through `pyarrow.fs`, which takes
its credentials, region and endpoint from the standard environment (for S3: the AWS SDK's chain,
`AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_S3` for S3-compatible stores, `AWS_MAX_ATTEMPTS` for the
attempts of each request).

The functions here mirror `os` / `os.path` (`listdir`, `walk`, `isfile`...): the listing code of
the sources calls them with a path or a URI alike. A URI is kept as written in every row (`source`,
`input_files.path`), so findings name the object the user gave.

Executors re-create the filesystem from the URI (filesystem objects are not shipped). The endpoint,
region and attempts the driver resolved are passed to them in the reader's options (`settings()`),
because the executors' environment is the cluster's, not the driver's session: the driver's
configuration decides which store is read. Credentials are never passed: each process takes its
own from its environment (instance profile, workload identity, `AWS_ACCESS_KEY_ID`...).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shutil
from collections.abc import Callable, Iterator
from functools import lru_cache
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from eos_audit.errors import ConfigError

# URI schemes read through pyarrow.fs, and the scheme pyarrow knows them by (Hadoop's `s3a://`
# spelling of S3, `gcs://` of GCS, `abfs://` of ABFS).
_SCHEMES = {
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gs",
    "gcs": "gs",
    "abfs": "abfs",
    "abfss": "abfss",
    "hdfs": "hdfs",
    "viewfs": "viewfs",
}
# The driver's S3 endpoint, region and attempts per request (non-secret), handed to the executors.
_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
_REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
# The AWS SDKs' and CLI's variable for the attempts of a request, the first included. Unset, the
# SDK's standard retries apply (3 attempts, with backoff): a store that cannot be reached takes
# about 1.6 s per request to be given up.
_MAX_ATTEMPTS_VARIABLE = "AWS_MAX_ATTEMPTS"


def is_remote(path: str) -> bool:
    """Whether a path is a URI read through pyarrow.fs (an object store or HDFS)."""
    scheme, sep, _ = path.partition("://")
    return bool(sep) and scheme.lower() in _SCHEMES


def is_uri(path: str) -> bool:
    """Whether a path is a URI of any scheme (s3a://, abfss://, dbfs:...), not a local path.

    Wider than `is_remote`: a URI only Spark's connectors know (dbfs:) is one too. A URI is
    never resolved or joined as a local path (`pathlib` turns `s3://b/k` into `s3:/b/k`).
    """
    return "://" in path or path.startswith("dbfs:")


def canonical(uri: str) -> str:
    """A URI spelled one way for comparisons: Hadoop's `s3a://`/`s3n://` as `s3://`, no end slash.

    `s3://b/wh` and `s3a://b/wh/` name the same objects (the scheme only picks the client).
    """
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri.rstrip("/") or uri
    name = _SCHEMES.get(scheme.lower(), scheme.lower())
    return f"{name}://{rest.rstrip('/')}"


def settings() -> dict[str, str]:
    """The driver's S3 endpoint, region and attempts from its environment, for the executors.

    No secrets: each process takes its credentials from its own environment.

    Raises:
        ConfigError: AWS_MAX_ATTEMPTS is set to something other than a whole number from 1.
    """
    out = {}
    endpoint = next((os.environ[v] for v in _ENDPOINT_VARIABLES if os.environ.get(v)), None)
    region = next((os.environ[v] for v in _REGION_VARIABLES if os.environ.get(v)), None)
    attempts = os.environ.get(_MAX_ATTEMPTS_VARIABLE, "").strip()
    if endpoint:
        out["s3_endpoint"] = endpoint
    if region:
        out["s3_region"] = region
    if attempts:
        if not attempts.isdecimal() or int(attempts) < 1:
            raise ConfigError(
                f"{_MAX_ATTEMPTS_VARIABLE}={attempts!r}: the attempts of each request to the "
                "object store must be a whole number, 1 or more (unset: the AWS SDK's 3)"
            )
        out["s3_max_attempts"] = str(int(attempts))
    return out


def delta_storage_options(path: str) -> dict[str, str] | None:
    """delta-rs's storage options for a Delta table at `path`: the store this process reads.

    None for a local path. For S3, the endpoint and region the environment gives (as `settings`),
    and plain HTTP allowed when the endpoint is an `http://` one (an S3-compatible store on a
    private network): delta-rs refuses it otherwise ("URL scheme is not allowed"). Credentials
    are delta-rs's own from the environment, as for every other reader.
    """
    if not is_remote(path):
        return None
    config = settings()
    options: dict[str, str] = {}
    if config.get("s3_endpoint"):
        options["AWS_ENDPOINT_URL"] = config["s3_endpoint"]
        if config["s3_endpoint"].lower().startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    if config.get("s3_region"):
        options["AWS_REGION"] = config["s3_region"]
    return options


@lru_cache(maxsize=32)
def _filesystem(
    root: str, s3_endpoint: str, s3_region: str, s3_max_attempts: str
) -> tuple[pafs.FileSystem, str]:
    """The filesystem of `scheme://authority` and the pyarrow path of its root.

    Cached: an S3 filesystem costs a region lookup and a connection pool.
    """
    if root.startswith("s3://") and (s3_endpoint or s3_max_attempts):
        bucket = root[len("s3://") :]
        options: dict = {}
        if s3_endpoint:  # an S3-compatible store, answering for the region it is given
            options["endpoint_override"] = s3_endpoint
        if s3_region:
            options["region"] = s3_region
        elif not s3_endpoint:  # AWS itself: the bucket's own region, as `from_uri` asks it
            options["region"] = pafs.resolve_s3_region(bucket)
        if s3_max_attempts:
            options["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(int(s3_max_attempts))
        return pafs.S3FileSystem(**options), bucket
    fs, path = pafs.FileSystem.from_uri(root + "/")
    return fs, path.rstrip("/")


def resolve(uri: str, config: dict[str, str] | None = None) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem of a URI and the object's path in it.

    Args:
        uri: a URI for which `is_remote` holds.
        config: `settings()` as the driver resolved them (None: this process's environment).

    Raises:
        OSError: the filesystem cannot be created (pyarrow's errors are OSError subclasses, or
            ValueError for a malformed URI, turned into OSError here).
    """
    parts = urlsplit(uri)
    scheme = _SCHEMES[parts.scheme.lower()]
    config = settings() if config is None else config
    try:
        fs, base = _filesystem(
            f"{scheme}://{parts.netloc}",
            config.get("s3_endpoint", ""),
            config.get("s3_region", ""),
            config.get("s3_max_attempts", ""),
        )
    except ValueError as exc:
        raise OSError(f"cannot open filesystem of {uri}: {exc}") from exc
    key = parts.path.strip("/")
    return fs, f"{base}/{key}" if base and key else (base or "/" + key)


def _info(path: str) -> pafs.FileInfo:
    fs, inner = resolve(path)
    return fs.get_file_info(inner)


def exists(path: str) -> bool:
    """`os.path.exists` for a path or URI.

    A URI the store does not answer for (access denied, no connection) may exist: True, and
    `readable` then says it cannot be read, so the run names it as unreadable, not as missing.
    """
    if not is_remote(path):
        return os.path.exists(path)
    try:
        return _info(path).type != pafs.FileType.NotFound
    except OSError:
        return True


def isfile(path: str) -> bool:
    """`os.path.isfile` for a path or URI."""
    if not is_remote(path):
        return os.path.isfile(path)
    try:
        return _info(path).type == pafs.FileType.File
    except OSError:
        return False


def isdir(path: str) -> bool:
    """`os.path.isdir` for a path or URI (an object store's prefix holding objects is one)."""
    if not is_remote(path):
        return os.path.isdir(path)
    try:
        return _info(path).type == pafs.FileType.Directory
    except OSError:
        return False


def getsize(path: str) -> int:
    """`os.path.getsize` for a path or URI.

    Raises:
        OSError: no such file.
    """
    return stat(path)[0]


def stat(path: str) -> tuple[int, int]:
    """(size, mtime in ns) of a file; an object's last-modified time, 0 where the store has none.

    Raises:
        OSError: no such file.
    """
    if not is_remote(path):
        st = os.stat(path)
        return st.st_size, st.st_mtime_ns
    info = _info(path)
    if info.type != pafs.FileType.File:
        raise FileNotFoundError(f"no such object: {path}")
    return info.size or 0, info.mtime_ns or 0


def listdir(path: str) -> list[str]:
    """`os.listdir` for a path or URI: the names of the entries of a directory.

    Raises:
        OSError: the directory cannot be listed.
    """
    if not is_remote(path):
        return os.listdir(path)
    fs, inner = resolve(path)
    infos = fs.get_file_info(pafs.FileSelector(inner, recursive=False))
    return [info.base_name for info in infos]


def files_in(path: str) -> dict[str, int]:
    """The files of a directory (not its subdirectories) and their sizes, from one listing.

    Raises:
        OSError: the directory cannot be listed.
    """
    if not is_remote(path):
        out = {}
        with os.scandir(path) as entries:
            for entry in entries:
                try:
                    if entry.is_file():
                        out[entry.name] = entry.stat().st_size
                except OSError:  # vanished while listing, as `os.path.isfile` would say
                    continue
        return out
    fs, inner = resolve(path)
    infos = fs.get_file_info(pafs.FileSelector(inner, recursive=False))
    return {i.base_name: i.size or 0 for i in infos if i.type == pafs.FileType.File}


def remote_tree(uri: str) -> list[tuple[str, int, int]]:
    """(path relative to `uri`, size, mtime in ns) of every object under a URI, from one listing.

    Raises:
        OSError: the URI cannot be listed.
    """
    fs, inner = resolve(uri)
    infos = fs.get_file_info(pafs.FileSelector(inner, recursive=True, allow_not_found=True))
    return sorted(
        (i.path[len(inner) :].strip("/"), i.size or 0, i.mtime_ns or 0)
        for i in infos
        if i.type == pafs.FileType.File
    )


def walk(
    root: str, onerror: Callable[[OSError], None] | None = None
) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk` (top-down; the caller may prune `dirnames`) for a path or URI.

    A URI is listed with one recursive listing (an object store has no directories to enter one
    by one); an error listing it is passed to `onerror` with the URI as `filename`.
    """
    if not is_remote(root):
        yield from os.walk(root, onerror=onerror)
        return
    try:
        fs, inner = resolve(root)
        infos = fs.get_file_info(pafs.FileSelector(inner, recursive=True))
    except OSError as exc:
        if onerror is not None:
            onerror(OSError(exc.errno, str(exc), root))
        return
    root = root.rstrip("/")
    children: dict[str, tuple[list[str], list[str]]] = {root: ([], [])}

    def directory(full: str) -> tuple[list[str], list[str]]:
        # Stores without directory markers list only objects: their prefixes are directories.
        if full not in children:
            parent, name = posixpath.split(full)
            directory(parent)[0].append(name)
            children[full] = ([], [])
        return children[full]

    for info in sorted(infos, key=lambda i: i.path):
        full = f"{root}/{info.path[len(inner) :].strip('/')}"
        if info.type == pafs.FileType.Directory:
            directory(full)
        elif info.type == pafs.FileType.File:
            parent, name = posixpath.split(full)
            directory(parent)[1].append(name)

    def visit(dirpath: str) -> Iterator[tuple[str, list[str], list[str]]]:
        dirnames, filenames = children.get(dirpath, ([], []))
        dirnames = list(dirnames)
        yield dirpath, dirnames, list(filenames)
        for d in dirnames:  # after the caller pruned them
            yield from visit(f"{dirpath}/{d}")

    yield from visit(root)


def is_delta_table(path: str) -> bool:
    """Whether a Delta table is at `path` (its `_delta_log` folder), a local path or a URI."""
    return isdir(join(path, "_delta_log"))


def join(path: str, *names: str) -> str:
    """`os.path.join` for a path or URI (a URI joined as text: `s3://b/wh` + `t` is `s3://b/wh/t`)."""
    return posixpath.join(path, *names) if is_uri(path) else os.path.join(path, *names)


def dirname(path: str) -> str:
    """`os.path.dirname` for a path or URI."""
    return posixpath.dirname(path.rstrip("/")) if is_remote(path) else os.path.dirname(path)


def basename(path: str) -> str:
    """`os.path.basename` for a path or URI."""
    return posixpath.basename(path.rstrip("/")) if is_remote(path) else os.path.basename(path)


def abspath(path: str) -> str:
    """`os.path.abspath`; a URI as written, without a trailing slash."""
    return path.rstrip("/") if is_remote(path) else os.path.abspath(path)


def readable(path: str) -> bool:
    """Whether the run may read a file or list a directory.

    Local: `os.access` (the kernel's answer for the process's identity, no open). A URI: whether
    the store answers for it (a denied or failing request is not readable).
    """
    if not is_remote(path):
        mode = os.R_OK | os.X_OK if os.path.isdir(path) else os.R_OK
        return os.access(path, mode)
    try:
        fs, inner = resolve(path)
        info = fs.get_file_info(inner)
        if info.type == pafs.FileType.Directory:
            fs.get_file_info(pafs.FileSelector(inner, recursive=False))
        return info.type != pafs.FileType.NotFound
    except OSError:
        return False


def read_bytes(path: str) -> bytes:
    """The whole content of a small file or object (a Delta commit, a checkpoint pointer).

    Raises:
        OSError: it cannot be read.
    """
    if not is_remote(path):
        with open(path, "rb") as fh:
            return fh.read()
    return bytes(read_remote(path))


def write_bytes(path: str, data: bytes) -> None:
    """Write a whole file or object; an object store's PUT makes it visible whole or not at all.

    Raises:
        OSError: it cannot be written (the message names the store's error).
    """
    if not is_remote(path):
        with open(path, "wb") as fh:
            fh.write(data)
        return
    fs, inner = resolve(path)
    with fs.open_output_stream(inner) as out:
        out.write(data)


def remove(path: str) -> None:
    """Remove one file or object; one that is not there is no error.

    Raises:
        OSError: it exists and cannot be removed.
    """
    if not is_remote(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    fs, inner = resolve(path)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_file(inner)


def remove_tree(path: str) -> None:
    """Remove a folder and everything under it, as far as possible (no error raised).

    For scratch space, whose removal must not fail the run it served (`shutil.rmtree`'s
    `ignore_errors`).
    """
    if not is_remote(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    with contextlib.suppress(OSError, ValueError):
        fs, inner = resolve(path)
        fs.delete_dir(inner)


# Hadoop's wording when Spark has no filesystem for a URI's scheme (no connector in the session),
# or, for a scheme Hadoop maps to a connector's class, that the class is not there.
_NO_FILESYSTEM = re.compile(r'No FileSystem for scheme "?([A-Za-z][A-Za-z0-9+.-]*)"?')
_FILESYSTEM_CLASS_NOT_FOUND = re.compile(r"Class (org\.apache\.hadoop\.fs\.\S+) not found")
_CONNECTOR_SCHEMES = {
    "org.apache.hadoop.fs.s3a.S3AFileSystem": "s3a",
    "org.apache.hadoop.fs.azurebfs.AzureBlobFileSystem": "abfs",
    "org.apache.hadoop.fs.azurebfs.SecureAzureBlobFileSystem": "abfss",
}


def missing_connector(text: str) -> str | None:
    """What Spark lacks, from its error's text, when it has no connector for a URI's scheme.

    Returns:
        `s3a:// URIs` (the scheme's URIs), `these URIs (<class> not found)` for a connector
        class Hadoop names without a known scheme, or None: the error is another one.
    """
    scheme = _NO_FILESYSTEM.search(text)
    if scheme:
        return f"{scheme.group(1)}:// URIs"
    missing_class = _FILESYSTEM_CLASS_NOT_FOUND.search(text)
    if missing_class:
        named = _CONNECTOR_SCHEMES.get(missing_class.group(1))
        return f"{named}:// URIs" if named else f"these URIs ({missing_class.group(1)} not found)"
    return None


def read_remote(path: str, config: dict[str, str] | None = None) -> memoryview:
    """The whole content of an object, for a parser on an executor.

    The parsers walk a file by byte position (a segment's batches, a snapshot's entries), so they
    take the file whole: one file's size in memory per running task (a segment is at most
    `log.segment.bytes`, 1 GiB by default), the same bytes a local file's memory map gives them.
    Nothing is written to local disk.

    Raises:
        OSError: the object cannot be read.
    """
    fs, inner = resolve(path, config)
    with fs.open_input_file(inner) as fh:
        return memoryview(fh.read_buffer())
