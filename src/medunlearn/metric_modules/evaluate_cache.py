"""``register_evaluate_modules()``: make ``evaluate.load("disease_leakage")`` work by its bare name, offline.

For a name without a slash, ``evaluate`` (0.4.6, ``loading.evaluation_module_factory``) looks for
``./<name>/<name>.py``, then asks the Hub for ``evaluate-metric/<name>``, and when that fails falls back to
its module cache (``CachedEvaluationModuleFactory``)::

    $HF_MODULES_CACHE/evaluate_modules/metrics/evaluate-metric--<name>/<hash>/<name>.py

taking, among the folders whose name is 64 characters long, the one whose ``<name>.py`` was modified last, and
importing it as ``evaluate_modules.metrics.evaluate-metric--<name>.<hash>.<name>`` (hence an ``__init__.py``
in every folder on the way). :func:`register_evaluate_modules` writes each module of the installed medunlearn
there (the files :func:`~medunlearn.metric_modules.loading.metric_module_path` finds), under the SHA-256 of
the file's bytes: installing twice writes nothing new; installing another version adds its own folder and
makes it the latest. ``evaluate.load`` then logs that it uses "the latest cached version of the module",
because the Hub has no ``evaluate-metric/<name>``.

Nothing is written on ``import medunlearn``: call :func:`register_evaluate_modules` (or run
``medunlearn metrics install``) once per medunlearn version. ``HF_MODULES_CACHE`` is evaluate's own
(``evaluate.config.HF_MODULES_CACHE``: ``$HF_MODULES_CACHE``, or ``$HF_HOME/modules``); ``modules_cache``
chooses another folder.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from medunlearn.errors import MedunlearnError
from medunlearn.metric_modules.loading import available_metrics, metric_module_path

__all__ = [
    "EvaluateModulesCacheError",
    "ModuleInstallation",
    "evaluate_modules_folder",
    "installed_evaluate_modules",
    "register_evaluate_modules",
]

# evaluate 0.4.6: config.MODULE_NAME_FOR_DYNAMIC_MODULES, the module type's folder, the canonical namespace.
DYNAMIC_MODULES = "evaluate_modules"
MODULE_TYPE_FOLDER = "metrics"
NAMESPACE = "evaluate-metric"


class EvaluateModulesCacheError(MedunlearnError, OSError):
    """evaluate's module cache cannot be written."""


@dataclass(frozen=True)
class ModuleInstallation:
    """One medunlearn module in evaluate's cache.

    ``status``, from :func:`register_evaluate_modules`: ``"written"`` (this call wrote it) or ``"unchanged"``
    (already there, byte for byte); from :func:`installed_evaluate_modules`: ``"installed"``
    (``evaluate.load`` takes this version), ``"other version"`` (it takes another one, at ``path``: run the
    install again) or ``"not installed"``.
    """

    name: str
    sha256: str
    path: Path
    status: str


def _modules_cache(modules_cache: str | Path | None) -> Path:
    if modules_cache is not None:
        return Path(modules_cache)
    import evaluate.config

    return Path(evaluate.config.HF_MODULES_CACHE)


def evaluate_modules_folder(modules_cache: str | Path | None = None) -> Path:
    """``<HF_MODULES_CACHE>/evaluate_modules/metrics``, where evaluate keeps the modules it loaded by name."""
    return _modules_cache(modules_cache) / DYNAMIC_MODULES / MODULE_TYPE_FOLDER


def _module_file(folder: Path, name: str, sha256: str) -> Path:
    return folder / f"{NAMESPACE}--{name}" / sha256 / f"{name}.py"


def _source(name: str) -> bytes:
    return (metric_module_path(name) / f"{name}.py").read_bytes()


def _touch_init(folder: Path) -> None:
    init = folder / "__init__.py"
    if not init.exists():
        init.write_bytes(b"")


def _versions(module_folder: Path, name: str) -> list[Path]:
    """The cached ``<name>.py`` files evaluate chooses from (folders named by a 64-character hash)."""
    return [path for path in module_folder.glob(f"*/{name}.py") if len(path.parent.name) == 64]


def _make_latest(target: Path) -> None:
    """evaluate loads the most recently modified version: make it ``target``, also past a future-dated one."""
    others = [path.stat().st_mtime for path in _versions(target.parent.parent, target.stem) if path != target]
    moment = max([time.time(), *(mtime + 1 for mtime in others)])
    os.utime(target, (moment, moment))


def register_evaluate_modules(
    names: list[str] | None = None, modules_cache: str | Path | None = None
) -> list[ModuleInstallation]:
    """Write medunlearn's ``evaluate`` modules (all, or ``names``) into evaluate's module cache, so that
    ``evaluate.load(name)`` finds them by their bare name, offline. Idempotent; returns one entry per module.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as cache:
    ...     first = register_evaluate_modules(["disease_leakage"], cache)
    ...     again = register_evaluate_modules(["disease_leakage"], cache)
    >>> [m.status for m in first + again], first[0].path.name, first[0].path.parent.parent.name
    (['written', 'unchanged'], 'disease_leakage.py', 'evaluate-metric--disease_leakage')
    """
    folder = evaluate_modules_folder(modules_cache)
    results = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # evaluate imports <HF_MODULES_CACHE>/evaluate_modules/metrics/... as packages: __init__.py in each.
        for parent in (folder.parent.parent, folder.parent, folder):
            _touch_init(parent)
        for name in names if names is not None else available_metrics():
            source = _source(name)
            sha256 = hashlib.sha256(source).hexdigest()
            target = _module_file(folder, name, sha256)
            target.parent.mkdir(parents=True, exist_ok=True)
            _touch_init(target.parent.parent)
            _touch_init(target.parent)
            status = "unchanged"
            if not (target.is_file() and target.read_bytes() == source):
                partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
                partial.write_bytes(source)
                os.replace(partial, target)  # a concurrent evaluate.load never sees half a file
                status = "written"
            _make_latest(target)
            results.append(ModuleInstallation(name, sha256, target, status))
    except OSError as error:
        raise EvaluateModulesCacheError(
            f"cannot write evaluate's module cache {folder}: {error.strerror or error} "
            "(set HF_MODULES_CACHE to a writable folder)"
        ) from error
    return results


def installed_evaluate_modules(modules_cache: str | Path | None = None) -> list[ModuleInstallation]:
    """What :func:`register_evaluate_modules` would install, and whether ``evaluate.load`` takes it."""
    folder = evaluate_modules_folder(modules_cache)
    results = []
    for name in available_metrics():
        sha256 = hashlib.sha256(_source(name)).hexdigest()
        ours = _module_file(folder, name, sha256)
        versions = _versions(folder / f"{NAMESPACE}--{name}", name)
        latest = max(versions, key=lambda path: path.stat().st_mtime, default=None)
        if latest is None:
            status, path = "not installed", ours
        else:
            status, path = ("installed" if latest == ours else "other version"), latest
        results.append(ModuleInstallation(name, sha256, path, status))
    return results
