"""``medunlearn amnesia build | audit | publish``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from medunlearn.amnesia.audit import AuditFailure, audit_folder
from medunlearn.amnesia.hub import print_split_table, publish_folder
from medunlearn.amnesia.pipeline import build_amnesia
from medunlearn.cli.options import (
    concurrency_count,
    llm_spec,
    non_negative_float,
    non_negative_int,
    patient_count,
    positive_float,
    positive_int,
    probability,
    qa_per_type_count,
    seed_int,
)
from medunlearn.ontology.amnesia import DISEASE_LEVEL_DEFAULT, DISEASES
from medunlearn.utils.files import atomic_write_text, check_apart_from_output, check_output_file

EXAMPLES = """examples:
  medunlearn amnesia build --out amnesia --patients 200 --seed 0
  medunlearn amnesia build --out amnesia-pmc --source pmc-patients --notes PMC-Patients.csv --qa qa.jsonl
  medunlearn amnesia build --out amnesia-llm --source pmc-patients --notes PMC-Patients.csv \
      --generate openai:smollm2-135m@http://127.0.0.1:8000/v1 --max-regenerations 2
  medunlearn amnesia audit amnesia
  medunlearn amnesia publish amnesia --repo my-org/amnesia-synthetic --dry-run
"""


def build_parser(prog: str = "medunlearn amnesia") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Build, audit and publish AMNESIA dataset folders "
        "(load them with datasets.load_dataset).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    _add_build_parser(sub)
    _add_audit_parser(sub)
    _add_publish_parser(sub)
    return parser


def _add_build_parser(sub) -> None:
    build = sub.add_parser(
        "build",
        help="build a Hub-ready folder from the fictitious cohort or from PMC-Patients notes + a QA file",
        description="Build a Hub-ready AMNESIA folder: parquet per config and split, "
        "README with configs and card.",
        epilog="example:\n  medunlearn amnesia build --out amnesia --patients 200 --seed 0",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build.add_argument(
        "--out", required=True, help="folder to write (atomically: nothing half-written on failure)"
    )
    build.add_argument(
        "--source",
        choices=["synthetic", "pmc-patients"],
        default="synthetic",
        help="synthetic: the embedded fictitious cohort (default); pmc-patients: --notes and --qa",
    )
    build.add_argument(
        "--patients",
        type=patient_count,
        default=8820,
        help="cohort size for --source synthetic (default: 8820, the paper's; at most 100,000: about 1 GB "
        "and two minutes)",
    )
    build.add_argument(
        "--seed", type=seed_int, default=0, help="fixes the cohort, the holdout and every split"
    )
    build.add_argument("--notes", help="PMC-Patients file (.csv, .json or .jsonl) for --source pmc-patients")
    build.add_argument(
        "--qa", help="QA file (.jsonl: patient_id, qa_type, question, answer) for --source pmc-patients"
    )
    build.add_argument(
        "--disease-level",
        default=",".join(DISEASE_LEVEL_DEFAULT),
        help=f"comma-separated diseases with disease-level splits (default: %(default)s; "
        f"known: {', '.join(DISEASES)})",
    )
    build.add_argument(
        "--qa-per-type",
        type=qa_per_type_count,
        default=4,
        help="QA of each type per patient (default: 4; at least 2: one of each type is held out)",
    )
    build.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    _add_llm_construction_options(build)


def _add_llm_construction_options(build: argparse.ArgumentParser) -> None:
    llm = build.add_argument_group(
        "LLM construction (--source pmc-patients --notes FILE --generate SPEC, no --qa)",
        "Label the notes, write their QA and validate them with a judge panel "
        "(docs/amnesia-construction.md). "
        "Specs are BACKEND:MODEL: transformers:smollm2-135m, openai:MODEL@http://HOST:PORT/v1; an API key is "
        "read from $MEDUNLEARN_LLM_API_KEY (or $OPENAI_API_KEY), never from the command line.",
    )
    llm.add_argument(
        "--generate", metavar="SPEC", type=llm_spec, help="the generator's spec: build the QA with LLMs"
    )
    llm.add_argument(
        "--judge",
        metavar="SPEC",
        type=llm_spec,
        action="append",
        default=[],
        help="a judge's spec; repeat for a panel (default: the generator 3 times, which at temperature 0 is "
        "one distinct judge: greedy copies of one model give one answer)",
    )
    llm.add_argument(
        "--labeler",
        metavar="SPEC",
        type=llm_spec,
        help="the disease labeller's spec (default: the generator)",
    )
    llm.add_argument(
        "--llm-cache",
        metavar="FILE",
        help="SQLite cache of every LLM answer: reruns are free, killed runs resume "
        "(default: OUT.llm-cache.sqlite beside --out)",
    )
    llm.add_argument(
        "--max-regenerations",
        type=non_negative_int,
        default=2,
        help="rewrites of a failed QA before its patient is skipped (default: 2)",
    )
    llm.add_argument(
        "--min-groundedness",
        type=probability,
        default=0.5,
        help="least share of answer words found in the note",
    )
    llm.add_argument(
        "--prompt",
        metavar="NAME=FILE",
        action="append",
        default=[],
        help="replace a built-in prompt (disease_label, qa_generation, judge) with a YAML file",
    )
    llm.add_argument(
        "--sample", type=positive_int, help="build from a seeded random subset of this many notes"
    )
    llm.add_argument(
        "--note-chars", type=positive_int, default=3000, help="note characters shown to the LLMs"
    )
    llm.add_argument(
        "--judge-temperature",
        type=non_negative_float,
        default=0.0,
        help="the judges' temperature (default: 0); above 0, copies of one model are distinct judges",
    )
    llm.add_argument(
        "--judge-all",
        action="store_true",
        help="also judge the last round's QA of patients already lost (panel figures over every QA that "
        "passed the checks; costs those judge calls)",
    )
    _add_llm_request_options(llm)


def _add_llm_request_options(llm) -> None:
    """How requests reach the LLM servers (the construction options' last part)."""
    llm.add_argument(
        "--concurrency",
        type=concurrency_count,
        default=8,
        help="requests in flight per server (at most 1,024)",
    )
    llm.add_argument(
        "--request-timeout",
        type=positive_float,
        default=1800.0,
        help="seconds one server request may take before it is retried (default: 1800; a busy server shares "
        "its speed among --concurrency requests)",
    )


AUDIT_EPILOG = """exit status:
  0  every invariant holds
  1  the folder was read and an invariant does not hold (the first violation is named: file, row, field)
  2  usage error: the folder is missing or a file, has no README.md, or a data file its README lists
     is missing or not readable parquet (named as `medunlearn amnesia: error: ...`)

example:
  medunlearn amnesia audit amnesia"""


def _add_audit_parser(sub) -> None:
    audit = sub.add_parser(
        "audit",
        help="check every split invariant of a folder; exit 0 iff all hold",
        description="Re-read an AMNESIA folder and check every split invariant; "
        "exit 1 naming the first violation.",
        epilog=AUDIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    audit.add_argument("folder", help="an AMNESIA folder written by `medunlearn amnesia build`")


def _add_publish_parser(sub) -> None:
    publish = sub.add_parser(
        "publish",
        help="upload a folder to the Hugging Face Hub as a dataset repo",
        description="Upload a folder with huggingface_hub. The token is read from HF_TOKEN or your login.",
        epilog="example:\n  medunlearn amnesia publish amnesia --repo my-org/amnesia-synthetic --dry-run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    publish.add_argument("folder", help="an AMNESIA folder")
    publish.add_argument("--repo", required=True, help="dataset repo id, ORG/NAME")
    publish.add_argument("--private", action="store_true", help="create the repo as private")
    publish.add_argument("--dry-run", action="store_true", help="list what would be uploaded, upload nothing")


def construction_config(args: argparse.Namespace):
    from medunlearn.amnesia.sources.llm_built import ConstructionConfig
    from medunlearn.errors import InputError

    if args.source != "pmc-patients" or not args.notes or args.qa:
        raise InputError("--generate needs --source pmc-patients and --notes FILE, and no --qa")
    prompts = {}
    for item in args.prompt:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise InputError(f"--prompt {item!r}: expected NAME=FILE")
        prompts[name] = path
    out = Path(args.out)
    cache = Path(args.llm_cache) if args.llm_cache else out.with_name(out.name + ".llm-cache.sqlite")
    check_output_file(cache, {"--notes": args.notes, "--prompt": list(prompts.values())}, "--llm-cache")
    check_apart_from_output(out, {"--llm-cache": cache})  # the built folder replaces --out whole
    return ConstructionConfig(
        generator=args.generate,
        judges=tuple(args.judge),
        labeler=args.labeler,
        cache=cache,
        qa_per_type=args.qa_per_type,
        max_regenerations=args.max_regenerations,
        min_groundedness=args.min_groundedness,
        note_chars=args.note_chars,
        prompts=prompts,
        seed=args.seed,
        sample=args.sample,
        judge_temperature=args.judge_temperature,
        judge_all=args.judge_all,
        concurrency=args.concurrency,
        request_timeout_s=args.request_timeout,
    )


def _percent(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def print_construction(construction) -> None:
    """The construction report as tables: the panel beside the paper's figures, judges, skips, tokens."""
    from rich.console import Console
    from rich.table import Table

    from medunlearn.amnesia.sources.llm_built.judge_panel import describe_panel

    report = construction.report
    panel = report["panel"]
    console = Console()
    figures = Table(title="LLM construction: panel figures")
    for column in ("figure", "this build", "paper"):
        figures.add_column(column, justify="left" if column == "figure" else "right")
    rows = (("disease labels supported", "labels_supported"), ("QA valid (4 criteria)", "qa_valid"))
    for name, key in rows:
        figure = panel[key]
        figures.add_row(name, f"{_percent(figure['ours'])} (n={figure['n']:,})", _percent(figure["paper"]))
    # One distinct judge: no κ (its agreement with itself is 1 by construction), no majority.
    for name, value in (panel["fleiss_kappa"] or {}).items():
        figures.add_row(f"Fleiss' κ {name}", "undefined" if value is None else f"{value:.3f}", "—")
    console.print(figures)
    console.print(f"judge panel: {describe_panel(panel, quote='')}")
    judges = Table(title="distinct judges")
    columns = ("judge", "model", "copies", "QA rated", "missing", "QA valid", "labels supported")
    for column in (*columns, "with majority"):
        judges.add_column(column, justify="left" if column == "model" else "right")
    for judge in panel["per_judge"]:
        judges.add_row(
            str(judge["judge"]),
            judge["model"],
            str(judge["copies"]),
            f"{judge['qa_rated']:,}",
            f"{judge['qa_missing']:,}",
            _percent(judge["qa_valid"]),
            _percent(judge["labels_supported"]),
            _percent(judge["agreement_with_majority"]),
        )
    console.print(judges)
    tokens = Table(title="requests and tokens per stage")
    for column in ("stage", "requests", "failed", "attempts", "prompt tokens", "completion tokens"):
        tokens.add_column(column, justify="left" if column == "stage" else "right")
    for stage, usage in report["tokens"].items():
        tokens.add_row(
            stage,
            *(f"{usage[k]:,}" for k in ("requests", "failed", "attempts", "prompt_tokens")),
            f"{usage['completion_tokens']:,}",
        )
    console.print(tokens)
    labels, qa, notes = report["labels"], report["qa"], report["notes"]
    console.print(
        f"labels: {labels['llm']} from the LLM, {labels['rule_fallback']} rule-based fallback, "
        f"{labels['disagreements']} disagreements with the rule-based classifier "
        f"(of {labels['both_available']})"
    )
    console.print(
        f"QA: {qa['generated']} generated, {qa['passed_checks']} passed the checks, {qa['judged']} judged "
        f"({qa.get('not_judged_patient_lost', 0)} not: their patient was lost), "
        f"{qa['rejected_by_panel']} rejected by the panel, mean groundedness {qa['mean_groundedness']}"
    )
    for reason, count in report["skips"].items():
        console.print(f"skipped {count} patients: {reason}")
    console.print(
        f"notes: {notes['used']} used, {notes['kept']} kept; {construction.calls} LLM calls in this run, "
        f"{construction.cache_hits} answers from the cache; {construction.seconds_per_note:.2f} s per note"
    )


def warn_about_greedy_copies(config) -> None:
    """One warning line on stderr when the judge panel repeats a model at temperature 0 (the default panel):
    greedy copies of one model are one judge (docs/amnesia-construction.md, "The judge panel")."""
    from medunlearn.amnesia.sources.llm_built.judge_panel import panel_warning

    warning = panel_warning(config.judge_specs, config.judge_temperature)
    if warning:
        print(
            f"warning: {warning} For a panel, name different models with --judge, or sample with "
            "--judge-temperature above 0.",
            file=sys.stderr,
        )


def failed_report_path(out: str | Path) -> Path:
    """Where a construction that kept no patient leaves its report (beside ``--out``, like the cache): the
    folder is not written, but the counts say why."""
    out = Path(out)
    return out.with_name(out.name + ".construction.json")


def run(args: argparse.Namespace) -> int:
    if args.action == "build" and args.generate:
        from medunlearn.amnesia.pipeline import NoPatientLeftError, build_amnesia_from_notes

        start = time.perf_counter()
        diseases = [d.strip() for d in args.disease_level.split(",") if d.strip()]
        config = construction_config(args)
        warn_about_greedy_copies(config)
        try:
            folder, construction = build_amnesia_from_notes(
                args.out,
                args.notes,
                config,
                overwrite=args.overwrite,
                disease_level=diseases,
            )
        except NoPatientLeftError as error:
            print_construction(error.construction)  # the report says why, even with no folder to write
            report = failed_report_path(args.out)
            atomic_write_text(report, json.dumps(error.construction.report, indent=2, sort_keys=True) + "\n")
            print(f"no folder written; the construction report is in {report}")
            raise
        failed_report_path(args.out).unlink(missing_ok=True)  # a report of an earlier failed build
        print_split_table(Path(folder))
        print_construction(construction)
        print(f"wrote {folder} in {time.perf_counter() - start:.1f} s")
        return 0
    if args.action == "build":
        start = time.perf_counter()
        diseases = [d.strip() for d in args.disease_level.split(",") if d.strip()]
        folder = build_amnesia(
            args.out,
            overwrite=args.overwrite,
            source=args.source,
            patients=args.patients,
            seed=args.seed,
            notes_path=args.notes,
            qa_path=args.qa,
            disease_level=diseases,
            qa_per_type=args.qa_per_type,
        )
        print_split_table(Path(folder))
        print(f"wrote {folder} in {time.perf_counter() - start:.1f} s")
        return 0
    if args.action == "audit":
        try:
            result = audit_folder(args.folder)
        except AuditFailure as failure:  # a verdict, not a usage error: exit 1
            print(f"FAIL {failure}", file=sys.stderr)
            return 1
        for invariant, detail in result.checks:
            print(f"ok  {invariant}: {detail}")
        print(f"{args.folder}: all {len(result.checks)} invariant groups hold")
        return 0
    files = publish_folder(args.folder, args.repo, private=args.private, dry_run=args.dry_run)
    verb = "would upload" if args.dry_run else "uploaded"
    for name in files:
        print(f"{verb} {name}")
    print(f"{verb} {len(files)} files to https://huggingface.co/datasets/{args.repo}")
    return 0
