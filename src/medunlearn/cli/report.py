"""``medunlearn report EVALDIR...``: table, JSON and PNG plots comparing evaluation folders; given a study
folder (``medunlearn study``'s ``--out``), its figures against forget size and its Table 2 (docs/study.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from medunlearn.cli.options import resample_count, seed_int
from medunlearn.errors import InputError, OutputExistsError
from medunlearn.metrics.bootstrap import BootstrapConfig
from medunlearn.utils.files import check_not_an_input, check_writable, folder_listing, staged_folder

# The report itself (pandas, matplotlib) is imported by run(): `medunlearn report --help` needs none of it.

EPILOG = """example (two evaluations of the same forget config, e.g. from `medunlearn evaluate`):
  medunlearn report evals/grad_diff evals/simnpo --out evals/report

writes evals/report/report.json and the plots mu_afe_tradeoff.png, mu_same_vs_out_of_disease.png and
leakage_vs_degeneration.png, and prints one row per method × population × QA type
(MU, AFE, LS next to DS, ROUGE-L, Prob).

Attack results (`medunlearn attack`, docs/attacks.md) are picked up: an evaluation folder with an
attacks.json in it, in EVALDIR/attacks/ or in ../attacks/ (a study cell), or an attack folder named with
--attacks, adds the worst-case recovery and worst attack beside AFE and MU, and the plot
afe_vs_worst_case_recovery.png (AFE against worst-case recovery).

Given a study folder instead (it holds study.json), e.g. `medunlearn report /tmp/tiny --out
/tmp/tiny/report` after the `medunlearn study` example, it writes table2.md and table2.tex (methods x forget
sizes: AFE seen / holdout, MU same / out of disease, LS, DS), study_report.json (every value with its 95%
interval: patient-cluster bootstrap for one seed, two-level bootstrap over training seeds then patients for
several) and the figures study_mu_vs_forget_size.png, study_afe_vs_forget_size.png, study_ls_ds.png,
study_factual_vs_reasoning.png and study_holdout.png; with the study's `attacks:` stage, a worst-case
recovery column and study_afe_vs_worst_case_recovery.png."""


def build_parser(prog: str = "medunlearn report") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Compare evaluation folders: a table per method × population × QA type, "
        "report.json and plots.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "eval_dirs", nargs="+", metavar="EVALDIR", help="folders written by `medunlearn evaluate`"
    )
    parser.add_argument(
        "--out", default="report", help="where report.json and the PNGs go (default: ./report)"
    )
    parser.add_argument(
        "--resamples",
        type=resample_count,
        default=2000,
        help="patient-bootstrap resamples of every interval (2000; at most 10,000)",
    )
    parser.add_argument("--seed", type=seed_int, default=0, help="seed of the bootstrap (default 0)")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing, non-empty --out whole (an earlier report's folder)",
    )
    parser.add_argument(
        "--attacks",
        nargs="+",
        default=(),
        metavar="ATTACKDIR",
        help="attack folders (`medunlearn attack --out`) whose results join the evaluations by method name "
        "(found by themselves next to each EVALDIR)",
    )
    return parser


def is_study_folder(path) -> bool:
    """A ``medunlearn study`` folder: it holds the study's state file (``study.json``)."""
    from pathlib import Path

    return (Path(path) / "study.json").is_file()


# What a report writes (report.json, study_report.json, the PNG figures, table2.md / .tex, muse_results.md): a
# folder holding only such files may take another report; any other file or a subfolder is an evaluation's.
REPORT_SUFFIXES = frozenset({".json", ".png", ".md", ".tex"})


def _not_a_report_folder(folder: Path) -> str | None:
    """The first entry of ``folder`` that no report writes (a subfolder, a parquet shard), else ``None``."""
    for entry in sorted(folder.iterdir()):
        if not entry.is_file() or entry.suffix not in REPORT_SUFFIXES:
            return entry.name + ("/" if entry.is_dir() else "")
    return None


def _check_out(out, eval_dirs, attack_dirs=(), overwrite: bool = False) -> Path:
    """--out may lie inside an evaluation or study folder (a study's report/ does), but never be one of them
    or hold one, nor lie inside a folder of theirs that holds more than a report's files (the evaluation's
    outputs/, whose shards a rerun reuses): the report's files would land among, or replace, what it reads.
    It is a folder (not a file, not below one, not the current folder, not ``""``) this process may write,
    and, unless ``overwrite``, new or empty: the report replaces it whole (staged beside it), so a user's
    files, a model or an AMNESIA folder there would be lost."""
    target = check_not_an_input(out, {}, "--out")
    for folder in [*eval_dirs, *attack_dirs]:
        source = Path(folder).expanduser().resolve()
        if target == source or target in source.parents:
            raise InputError(
                f"--out {out} is or holds EVAL_DIR {folder}: a command never writes into its input"
            )
        if source not in target.parents:
            continue
        for inside in [*reversed(target.relative_to(source).parents[:-1]), target.relative_to(source)]:
            entry = _not_a_report_folder(source / inside) if (source / inside).is_dir() else None
            if entry is not None:
                where = "is" if inside == target.relative_to(source) else "lies inside"
                raise InputError(
                    f"--out {out} {where} {Path(folder) / inside}, which holds {entry} (an evaluation's "
                    f"files, not a report's): a report goes into a folder of its own, e.g. "
                    f"{Path(folder) / 'report'}"
                )
    if not overwrite and target.is_dir() and any(target.iterdir()):
        raise OutputExistsError(
            f"--out {out} already exists and holds {folder_listing(target)} (pass --overwrite to replace it "
            "whole, or name a new folder)"
        )
    check_writable(out)
    return target


def _check_distinct(folders, what: str) -> None:
    """No folder given twice (as itself, or by another path to it: ``./x``, a link): the report would hold
    each of its rows twice, and a mean or an interval over methods would count it twice, without a word."""
    seen: dict[Path, str] = {}
    for folder in folders:
        resolved = Path(folder).expanduser().resolve()
        if resolved in seen:
            same = "" if str(folder) == seen[resolved] else f" (as {seen[resolved]} and {folder})"
            raise InputError(f"{what} {folder} is given twice{same}: name each folder once")
        seen[resolved] = str(folder)


def run(args) -> int:
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # piped or logged: rich would assume 80 columns and squeeze the numbers away
        console = Console(width=160)
    from medunlearn.attacks.summary import write_robustness_plot
    from medunlearn.evaluation.report import write_report

    _check_distinct(args.eval_dirs, "EVALDIR")
    attack_dirs = tuple(getattr(args, "attacks", ()) or ())
    _check_distinct(attack_dirs, "--attacks folder")
    overwrite = getattr(args, "overwrite", False)
    _check_out(args.out, args.eval_dirs, attack_dirs, overwrite)
    bootstrap = BootstrapConfig(n_resamples=args.resamples, seed=args.seed)
    if len(args.eval_dirs) == 1 and is_study_folder(args.eval_dirs[0]):
        return _study_report(args, console, bootstrap, overwrite)
    # Written beside --out and swapped in whole when done: a failed report leaves --out as it was.
    with staged_folder(args.out, overwrite=overwrite) as staging:
        payload = write_report(
            args.eval_dirs,
            staging,
            console=console,
            bootstrap=bootstrap,
            attack_dirs=attack_dirs,
            robustness_plot=write_robustness_plot,
        )
    console.print(f"wrote {args.out}/report.json and {', '.join(payload['plots'])}")
    return 0


def _study_report(args, console, bootstrap, overwrite: bool) -> int:
    """The report of a study folder (its tables and figures), staged as :func:`run`'s."""
    from medunlearn.attacks.summary import write_robustness_plot
    from medunlearn.evaluation.report import write_study_report
    from medunlearn.study.collect import collect_results

    results = collect_results(args.eval_dirs[0])
    if results.get("benchmark") == "muse":  # a MUSE protocol study: its table and two figures
        from medunlearn.study.muse_collect import write_muse_report

        with staged_folder(args.out, overwrite=overwrite) as staging:
            files = write_muse_report(results, staging)
        console.print(f"wrote {', '.join(str(Path(args.out) / f.name) for f in files)}", highlight=False)
        return 0
    with staged_folder(args.out, overwrite=overwrite) as staging:
        payload = write_study_report(
            results, staging, console=console, bootstrap=bootstrap, robustness_plot=write_robustness_plot
        )
    files = ", ".join(payload["tables"] + payload["figures"])
    console.print(f"wrote {args.out}/study_report.json, {files}", highlight=False)
    if payload["missing"]:
        console.print(f"not finished yet (left out): {', '.join(payload['missing'])}", highlight=False)
    return 0
