r"""Atomic writes, strict JSON and content fingerprints: a file or folder is the old one or the whole new one.

A reader (a person, ``datasets``, a resumed run) never sees half a file: text goes to a temporary file in the
same folder, then ``os.replace`` renames it over the target (atomic on POSIX). A folder is built in a staging
folder beside it and swapped in whole: :func:`output_folder` is the one way every command writes its output
folder (checks first, then :func:`staged_folder`; docs/cli.md, "Output folders").

>>> import tempfile
>>> from pathlib import Path
>>> path = atomic_write_text(Path(tempfile.mkdtemp()) / "a" / "b.txt", "hello\n")
>>> path.read_text()
'hello\n'
>>> fingerprint({"b": 1, "a": [1, 2]}) == fingerprint({"a": [1, 2], "b": 1})
True
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from medunlearn.errors import InputError, OutputExistsError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename (with the
    permissions an ordinary ``open(path, "w")`` would give, not ``mkstemp``'s owner-only ones)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`atomic_write_bytes` of UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_lines(path: str | os.PathLike, lines: Iterable[str]) -> Path:
    """Write one line per item (each gets a trailing newline), atomically."""
    return atomic_write_text(path, "".join(f"{line}\n" for line in lines))


# ---------------------------------------------------------------------------------------------------------
# Output folders: the one way a command writes one (docs/cli.md, "Output folders")
#
# A run builds its folder in ``.OUT.partial-PID-HOST-XXXX`` beside ``OUT`` and renames it into place at the
# end. A killed run leaves that staging folder behind; the next run writing beside it removes the staging
# folders whose process is dead (PID and HOST are in the name, so a folder of another machine sharing the file
# system, or of a run still going, is never touched).

STAGING_KINDS = ("partial", "old")


def _host_tag() -> str:
    """8 hex digits of this machine's name (process ids only mean something on the machine that made them)."""
    return hashlib.sha256(socket.gethostname().encode("utf-8")).hexdigest()[:8]


def staging_owner_pid() -> int:
    """The process a staging folder is named after: this one or, under ``accelerate launch`` / torchrun
    (``WORLD_SIZE`` > 1), the launcher, the parent all launched processes share, so they agree on one
    folder."""
    return os.getppid() if int(os.environ.get("WORLD_SIZE", "1")) > 1 else os.getpid()


def _staging_prefix(out_dir: Path, kind: str, pid: int) -> str:
    return f".{out_dir.name}.{kind}-{pid}-{_host_tag()}-"


def staging_owner(out_dir: str | os.PathLike, path: str | os.PathLike) -> tuple[str, int] | None:
    """``(kind, pid)`` when ``path`` is a staging folder of ``out_dir`` made on this machine, else ``None``.

    >>> staging_owner("runs/model", f"runs/.model.partial-42-{_host_tag()}-x1y2")
    ('partial', 42)
    >>> staging_owner("runs/model", "runs/.model-2.partial-42-0000aaaa-x1y2") is None
    True
    """
    kinds = "|".join(STAGING_KINDS)
    pattern = rf"\.{re.escape(Path(out_dir).name)}\.({kinds})-(\d+)-{_host_tag()}-"
    match = re.match(pattern, Path(path).name)
    return (match[1], int(match[2])) if match else None


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (another user's process counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_staging(out_dir: str | os.PathLike) -> list[Path]:
    """Remove the staging folders of ``out_dir`` whose process is dead; returns them.

    A ``partial`` folder is a half-written output. An ``old`` folder holds the previous output while the new
    one is renamed in: when the kill fell between the two renames ``out_dir`` is missing, and the previous
    output is put back first, so the target is always the old folder or the whole new one.
    """
    out_dir = Path(out_dir)
    if not out_dir.parent.is_dir():
        return []
    removed = []
    for path in sorted(out_dir.parent.iterdir()):
        owner = staging_owner(out_dir, path)
        if owner is None or not path.is_dir() or process_alive(owner[1]):
            continue
        previous = path / out_dir.name
        if owner[0] == "old" and os.path.lexists(previous) and not os.path.lexists(out_dir):
            os.replace(previous, out_dir)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _is_non_empty(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def _input_conflict(out: Path, name: str, value: Any, *, holding: bool = True) -> str | None:
    """Why writing ``out`` would touch the input ``name`` (a local path; Hub ids and absent paths pass).
    ``holding``: an ``out`` that contains the input conflicts too (replaced whole, it would delete it)."""
    if value is None or str(value) == "" or not Path(value).expanduser().exists():
        return None
    source = Path(value).expanduser().resolve()
    if out == source:
        return f"is the {name} folder"
    if source in out.parents:
        return f"lies inside {name} {value}"
    if holding and out in source.parents:
        return f"contains {name} {value} (replacing it would delete the input)"
    return None


def _location_problem(out: Path) -> str | None:
    """Why ``out`` cannot be a folder this command replaces: the current folder (or above it), a file, or a
    path below a file."""
    cwd = Path.cwd().resolve()
    if out == cwd or out in cwd.parents:
        return f"is the current folder or holds it ({cwd}); name a folder to create"
    if out.exists() and not out.is_dir():
        return "is a file, not a folder"
    existing = next(parent for parent in out.parents if parent.exists())
    if not existing.is_dir():
        return f"lies below {existing}, which is a file"
    return None


def check_not_an_input(
    out_dir: str | os.PathLike, inputs: Mapping[str, Any] | None = None, flag: str = "--out"
) -> Path:
    """The checks of :func:`check_output_folder` that hold even where an existing output is expected (a
    resumable evaluation's folder): `out_dir` is not, does not contain and does not lie inside one of
    ``inputs``; it is not the current folder or above it, a file, or below a file. Returns it resolved.

    Then the staging folders that killed runs left beside `out_dir` are removed (:func:`remove_stale_staging`)
    whatever happens next: a rerun that fails on its inputs, or is refused an existing output, leaves no
    debris of an earlier run either."""
    if isinstance(out_dir, str) and not out_dir.strip():
        raise InputError(f"{flag} is empty: name the folder to write")
    out = Path(out_dir).expanduser().resolve()
    for name, value in (inputs or {}).items():
        for one in value if isinstance(value, (list, tuple)) else [value]:  # e.g. several --abstracts
            conflict = _input_conflict(out, name, one)
            if conflict:
                raise InputError(f"{flag} {out_dir} {conflict}: a command never writes into its input")
    problem = _location_problem(out)
    if problem:
        raise InputError(f"{flag} {out_dir} {problem}")
    # Named as the command names it (a link's own name): the staging folders are named after it.
    with suppress(OSError):  # a folder we may not list or write: the run's own staging says so, by name
        remove_stale_staging(Path(out_dir).expanduser())
    return out


def check_outside_inputs(out_dir: str | os.PathLike, inputs: Mapping[str, Any], flag: str = "--out") -> Path:
    """`out_dir` is not one of ``inputs`` and does not lie inside one: the check, run before anything is
    written, of a command that writes into its folder without ever replacing it whole (a study, whose folder
    may hold its own data). Returns it resolved.

    >>> import tempfile
    >>> data = Path(tempfile.mkdtemp())
    >>> check_outside_inputs(data / "runs", {"data.path": data})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    medunlearn.errors.InputError: --out .../runs lies inside data.path ...: a command never writes into ...
    """
    out = Path(out_dir).expanduser().resolve()
    for name, value in inputs.items():
        conflict = _input_conflict(out, name, value, holding=False)  # never replaced whole: may hold its data
        if conflict:
            raise InputError(f"{flag} {out_dir} {conflict}: a command never writes into its input")
    return out


def check_output_file(path: str | os.PathLike, inputs: Mapping[str, Any], flag: str) -> Path:
    """An output file a command writes beside its folder (an LLM cache, a saved pool) is not one of ``inputs``
    and does not lie inside an input folder: a cache named like the abstracts file would overwrite it. It may
    exist (a cache is reused). Returns it resolved.

    >>> import tempfile
    >>> notes = Path(tempfile.mkdtemp()) / "notes.csv"
    >>> _ = notes.write_text("patient_id,note")
    >>> check_output_file(notes, {"--notes": notes}, "--llm-cache")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    medunlearn.errors.InputError: --llm-cache ... is --notes ...: a command never writes over its input
    """
    out = Path(path).expanduser().resolve()
    for name, value in inputs.items():
        for one in value if isinstance(value, (list, tuple)) else [value]:
            if one is None or str(one) == "" or not Path(one).expanduser().exists():
                continue
            source = Path(one).expanduser().resolve()
            if out == source:
                raise InputError(f"{flag} {path} is {name} {one}: a command never writes over its input")
            if source in out.parents:
                raise InputError(
                    f"{flag} {path} lies inside {name} {one}: a command never writes into its input"
                )
    if out.is_dir():
        raise InputError(f"{flag} {path} is a folder, not a file")
    return out


def check_apart_from_output(
    out_dir: str | os.PathLike, paths: Mapping[str, Any], flag: str = "--out"
) -> None:
    """What a command writes beside its output folder (a saved pool, the mining stage files, an LLM cache) is
    neither ``out_dir`` nor inside it, whether it exists yet or not: the output folder is built in a staging
    folder that replaces ``out_dir`` whole, so a file written there would be lost (or, for a resumable
    folder, the build would replace its own stage files). ``paths``: ``{"--save-pool": path, ...}``;
    ``None`` is skipped.

    >>> check_apart_from_output("runs/bd", {"--save-pool": "runs/bd/pool.jsonl"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    medunlearn.errors.InputError: --save-pool runs/bd/pool.jsonl lies inside --out runs/bd, ... put it outside
    """
    out = Path(out_dir).expanduser().resolve()
    for name, value in paths.items():
        if value is None or str(value) == "":
            continue
        path = Path(value).expanduser().resolve()
        if path == out:
            raise InputError(f"{name} {value} is {flag} {out_dir}: give each its own place")
        if out in path.parents:
            raise InputError(
                f"{name} {value} lies inside {flag} {out_dir}, which is built aside and replaces that folder "
                "whole when done, so it would be lost: put it outside"
            )


def check_output_folder(
    out_dir: str | os.PathLike,
    *,
    overwrite: bool = False,
    inputs: Mapping[str, Any] | None = None,
    flag: str = "--out",
) -> Path:
    """Raise before any work when ``out_dir`` may not be written; returns it.

    Refused with :class:`~medunlearn.errors.InputError` even with ``overwrite``: an output that is, lies
    inside or contains one of ``inputs`` (``{"--model": path, "--data": path}``; Hub ids and absent paths are
    skipped), that is the current folder or above it, a file, or below a file. Refused with
    :class:`~medunlearn.errors.OutputExistsError` unless ``overwrite``: an existing folder that is not empty
    (an empty one is simply replaced).
    """
    out_dir = Path(out_dir)
    out = check_not_an_input(out_dir, inputs, flag)
    if not overwrite and _is_non_empty(out):
        raise OutputExistsError(f"{out_dir} already exists (pass --overwrite to replace it)")
    return out_dir


def folder_listing(folder: Path, shown: int = 5) -> str:
    """The first ``shown`` entries of ``folder`` by name, folders with a "/", for a refusal's message:
    ``"model.safetensors, notes/, thesis.txt and more"``."""
    held = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in folder.iterdir())
    return ", ".join(held[:shown]) + (" and more" if len(held) > shown else "")


def check_resumable_folder(
    out_dir: str | os.PathLike,
    *,
    overwrite: bool,
    inputs: Mapping[str, Any] | None = None,
    marks: Sequence[str] = ("run.json", "outputs"),
    what: str = "evaluation",
    flag: str = "--out",
) -> Path:
    """The checks of a command that resumes in its output folder (an evaluation): those of
    :func:`check_not_an_input`, then: an existing non-empty ``out_dir`` is continued only when it is a run of
    this command (it holds one of ``marks``: a finished run's ``run.json``, or the ``outputs/`` a killed run
    left); any other (a user's files, a model folder) is refused with
    :class:`~medunlearn.errors.OutputExistsError` unless ``overwrite``, which replaces it whole. Last
    :func:`check_writable`. Returns ``out_dir`` resolved.

    >>> import tempfile
    >>> mine = Path(tempfile.mkdtemp())
    >>> _ = (mine / "thesis.txt").write_text("mine")
    >>> check_resumable_folder(mine, overwrite=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    medunlearn.errors.OutputExistsError: --out ... holds no evaluation (no run.json, no outputs/) ...
    """
    out = check_not_an_input(out_dir, inputs, flag)
    if not overwrite and _is_non_empty(out) and not any(os.path.lexists(out / mark) for mark in marks):
        shown = ", ".join(f"no {mark}{'/' if '.' not in mark else ''}" for mark in marks)
        raise OutputExistsError(
            f"{flag} {out_dir} holds no {what} ({shown}) but {folder_listing(out)}: only a folder of its own "
            "is resumed (pass --overwrite to replace it, or name a new folder)"
        )
    check_writable(out_dir, flag)
    return out


def cannot_write(target: str | os.PathLike, error: OSError, verb: str = "write") -> InputError:
    """The named error of an ``OSError`` met writing ``target`` (a folder a user gave): ``cannot write
    runs/eval: Permission denied (runs/eval/summary.json)``."""
    return InputError(f"cannot {verb} {target}: {error.strerror or error} ({error.filename or target})")


def check_writable(folder: str | os.PathLike, flag: str = "--out") -> Path:
    """Raise before any work when ``folder`` (or, while it does not exist, the nearest folder above it, where
    it would be created) does not let this process create a file: a read-only or immutable folder, a
    read-only file system. Nothing is left behind (a probe file is created and removed). For the commands
    that write into their output folder as they go (an evaluation, a report) instead of staging it.

    >>> import tempfile
    >>> check_writable(Path(tempfile.mkdtemp()) / "new" / "eval").name
    'eval'
    """
    folder = Path(folder)
    existing = next((path for path in (folder, *folder.parents) if path.exists()), Path("."))
    try:
        handle, probe = tempfile.mkstemp(prefix=".medunlearn-write-probe-", dir=existing)
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise InputError(f"cannot write {flag} {folder}: {error.strerror or error} ({existing})") from error
    return folder


def open_staging(out_dir: str | os.PathLike) -> Path:
    """An empty staging folder beside ``out_dir`` (after removing the stale ones); launched processes share
    one.

    An unwritable place is an :class:`~medunlearn.errors.InputError` naming it, not a traceback.
    """
    out_dir = Path(out_dir)
    owner = staging_owner_pid()
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(out_dir)
        if owner != os.getpid():
            staging = out_dir.parent / (_staging_prefix(out_dir, "partial", owner) + "launch")
            staging.mkdir(exist_ok=True)
        else:
            staging = Path(
                tempfile.mkdtemp(prefix=_staging_prefix(out_dir, "partial", owner), dir=out_dir.parent)
            )
        os.chmod(staging, 0o777 & ~_umask())
    except OSError as error:
        raise cannot_write(out_dir, error) from error
    return staging


def commit_staging(staging: Path, out_dir: str | os.PathLike, *, overwrite: bool = True) -> Path:
    """Rename the finished ``staging`` folder to ``out_dir``, replacing what was there whole. Without
    ``overwrite``, a non-empty folder that appeared there during the run is kept and this raises."""
    out_dir = Path(out_dir)
    if not overwrite and _is_non_empty(out_dir):
        raise OutputExistsError(f"{out_dir} already exists (pass --overwrite to replace it)")
    if not os.path.lexists(out_dir):
        os.replace(staging, out_dir)
        return out_dir
    old = Path(tempfile.mkdtemp(prefix=_staging_prefix(out_dir, "old", os.getpid()), dir=out_dir.parent))
    try:
        os.replace(out_dir, old / out_dir.name)
    except OSError as error:  # an immutable or read-only folder: left as it was, and nothing beside it
        old.rmdir()
        raise cannot_write(out_dir, error, "replace") from error
    try:
        os.replace(staging, out_dir)
    except OSError as error:
        os.replace(old / out_dir.name, out_dir)  # the previous output back in its place
        old.rmdir()
        raise cannot_write(out_dir, error, "replace") from error
    try:
        shutil.rmtree(old)
    except OSError as error:  # a file of the previous output that may not be deleted (immutable)
        raise InputError(
            f"wrote {out_dir}, but cannot delete its previous version, moved to {old}: "
            f"{error.strerror or error}; delete it by hand"
        ) from error
    return out_dir


def discard_staging(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def staged_folder(out_dir: str | os.PathLike, *, overwrite: bool = True) -> Iterator[Path]:
    """Yield an empty staging folder beside ``out_dir``; on success it replaces ``out_dir`` (see
    :func:`commit_staging`), on any failure it is removed and ``out_dir`` is left as it was."""
    staging = open_staging(out_dir)
    try:
        yield staging
        commit_staging(staging, out_dir, overwrite=overwrite)
    except BaseException:
        discard_staging(staging)
        raise


@contextmanager
def staged_overwrite(
    out_dir: str | os.PathLike, overwrite: bool, *, writer: bool = True, records: Sequence[str] = ()
) -> Iterator[Path]:
    """Where a command that resumes in its output folder (an evaluation) writes: ``out_dir`` itself, whose
    finished batches a rerun reuses; but with ``overwrite`` and an ``out_dir`` that holds something, a staging
    folder beside it that replaces ``out_dir`` whole when the block ends (:func:`commit_staging`, by the
    ``writer`` process only: launched processes share the staging folder) and is removed on any failure,
    KeyboardInterrupt included. The old folder stays as it was until the new run is done. The JSON files
    ``records`` (a ``run.json`` naming its output folders) get their staging paths :func:`relocated` first.

    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "eval"
    >>> _ = atomic_write_text(out / "summary.json", "old")
    >>> with staged_overwrite(out, overwrite=True, records=["run.json"]) as work:
    ...     _ = atomic_write_text(work / "summary.json", "new")
    ...     _ = atomic_write_text(work / "run.json", json.dumps({"model": str(work / "outputs")}))
    ...     (work != out, (out / "summary.json").read_text())
    (True, 'old')
    >>> (out / "summary.json").read_text(), json.loads((out / "run.json").read_text()) == {
    ...     "model": str(out / "outputs")
    ... }
    ('new', True)
    """
    out_dir = Path(out_dir)
    if not (overwrite and _is_non_empty(out_dir)):
        yield out_dir
        return
    staging = open_staging(out_dir)
    try:
        yield staging
        if writer:
            relocate_records(staging, out_dir, [staging / name for name in records])
            commit_staging(staging, out_dir, overwrite=True)
    except BaseException:
        if writer:
            discard_staging(staging)
        raise


def relocate_records(staging: Path, out_dir: str | os.PathLike, records: Iterable[Path]) -> None:
    """Rewrite the JSON files ``records`` (in ``staging``, each a run's record naming its folders) with every
    path inside ``staging`` moved into ``out_dir`` (:func:`relocated`), before ``staging`` replaces
    ``out_dir``: the record then names the folders where they will be. Missing files are skipped."""
    for path in records:
        if path.is_file():
            recorded = relocated(json.loads(path.read_text()), staging, out_dir)
            atomic_write_text(path, json.dumps(recorded, indent=2))


def relocated(value: Any, source: str | os.PathLike, target: str | os.PathLike) -> Any:
    """``value`` (a path, or paths nested in dicts and lists, as a run records them) with every path inside
    ``source`` moved to the same place inside ``target``; anything else as it was.

    >>> relocated({"model": "runs/.ev.partial-1/outputs/model", "n": 3}, "runs/.ev.partial-1", "runs/ev")
    {'model': 'runs/ev/outputs/model', 'n': 3}
    """
    if isinstance(value, dict):
        return {key: relocated(item, source, target) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(relocated(item, source, target) for item in value)
    if isinstance(value, (str, os.PathLike)) and str(value):
        path, source = Path(value), Path(source)
        # As written first (a recorded path keeps its form), else resolved: a relative path and an absolute
        # one may name the same folder.
        for inside, root in ((path, source), (path.resolve(), source.resolve())):
            if inside == root or root in inside.parents:
                moved = Path(target) / inside.relative_to(root)
                return str(moved) if isinstance(value, str) else moved
    return value


@contextmanager
def output_folder(
    out_dir: str | os.PathLike,
    *,
    overwrite: bool = False,
    inputs: Mapping[str, Any] | None = None,
    flag: str = "--out",
) -> Iterator[Path]:
    """The one way a command writes its output folder: :func:`check_output_folder`, then
    :func:`staged_folder` (nothing half-written, stale staging of killed runs removed)."""
    check_output_folder(out_dir, overwrite=overwrite, inputs=inputs, flag=flag)
    with staged_folder(out_dir, overwrite=overwrite) as staging:
        yield staging


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def finite_or_none(value: Any) -> Any:
    """``value`` with every NaN / inf float, in nested dicts, lists and tuples too, replaced by ``None``: an
    undefined metric (AFE when the before model scored 0) is null in strict JSON (``allow_nan=False``).

    >>> finite_or_none({"afe": float("nan"), "mu": [0.5, float("inf")], "ci": (0.1, float("nan"))})
    {'afe': None, 'mu': [0.5, None], 'ci': (0.1, None)}
    """
    if isinstance(value, dict):
        return {key: finite_or_none(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite_or_none(item) for item in value]
    if isinstance(value, tuple):
        return tuple(finite_or_none(item) for item in value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def fingerprint(value: Any) -> str:
    """A short SHA-256 of :func:`canonical_json` of ``value`` (16 hex digits)."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()[:16]


def file_fingerprint(path: str | os.PathLike) -> str:
    """A short SHA-256 of a file's bytes (16 hex digits), read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


@contextmanager
def no_empty_output_on_failure(folder: str | os.PathLike) -> Iterator[None]:
    """A command that writes `folder` progressively (the evaluation's resumable shards, the mining stages)
    and fails: a folder it created and left without a file is removed, so that nothing that looks like a
    result stays behind. A folder holding outputs is kept, since the same command resumes from it; a line on
    stderr says so and names what it holds (the error that follows speaks for its own step only)."""
    import sys

    folder = Path(folder)
    existed = folder.exists()
    try:
        yield
    except BaseException:
        if not existed and folder.is_dir():
            if any(path.is_file() or path.is_symlink() for path in folder.rglob("*")):
                names = sorted(path.name + ("/" if path.is_dir() else "") for path in folder.iterdir())
                shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
                print(
                    f"note: the outputs computed so far are kept in {folder} ({shown}); the same command "
                    "resumes from them (or delete the folder)",
                    file=sys.stderr,
                )
            else:
                shutil.rmtree(folder, ignore_errors=True)
        raise
