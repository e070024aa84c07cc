"""MUSE protocol studies without training: the file's checks (file and key named), the grid's fingerprints,
the phases, and the sustainability chain — request k starts from request k - 1's model and forgets fold k —
played with planted unlearning and evaluation functions (docs/study.md, "MUSE protocols")."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest
import yaml

from medunlearn.errors import InputError
from medunlearn.study.config import StudyConfigError, load_study, parse_study
from medunlearn.study.grid import validate_study
from medunlearn.study.muse_grid import subset_muse_grid
from medunlearn.study.muse_stages import MuseCellJob, MuseEvaluationJob, MuseFinetuneJob, plan_muse_phases
from medunlearn.study.stages import StudyContext, run_job

REPO = Path(__file__).resolve().parents[2]
STUDIES = REPO / "recipes" / "studies"
SCALABILITY = STUDIES / "muse-scalability.yaml"
SUSTAINABILITY = STUDIES / "muse-sustainability.yaml"
FOLDS = ["forget_1", "forget_2", "forget_3", "forget_4"]


def raw_study(path: Path = SUSTAINABILITY) -> dict:
    return yaml.safe_load(path.read_text())


def with_change(path: list, value, base: Path = SUSTAINABILITY) -> dict:
    raw = raw_study(base)
    target = raw
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return raw


@pytest.mark.parametrize(
    ("path", "value", "key", "says"),
    [
        (["protocol"], KeyError, "protocol", "scalability or sustainability"),
        (["protocol"], "durability", "protocol", "scalability, sustainability"),
        (["benchmark"], "tofu", "benchmark", "amnesia, muse"),
        (["forget"], ["forget_2", "forget_1"], "forget", "in order"),
        (["forget"], ["forget_1", "forget_3"], "forget", "request k unlearning fold k"),
        (["forget"], ["forget_1", "forget_5"], "forget[1]", "not a MUSE fold"),
        (["forget"], ["forget_10"], "forget[0]", "not a MUSE fold"),
        (["forget"], [], "forget", "non-empty"),
        (["attacks"], {"attacks": ["holdout"]}, "attacks", "AMNESIA"),
        (["data", "build", "patients"], 40, "data.build.patients", "unknown key"),
        (["data", "build", "articles"], 2, "data.build.articles", "from 5"),
        (["data", "path"], "x", "data", "exactly one"),
        (["finetune", "qa_epochs"], 2.0, "finetune.qa_epochs", "allowed: epochs, sft"),
        (["finetune", "epochs"], 0, "finetune.epochs", "above 0"),
        (["finetune", "sft", "learning_rate"], -1.0, "finetune.sft.learning_rate", ""),
        (["evaluation", "runner", "max_new_tokens"], 8, "evaluation.runner.max_new_tokens", "two lengths"),
        (["evaluation", "preset"], "muse-bench", "evaluation.preset", "open-unlearning"),
        (["evaluation", "verbmem_max_new_tokens"], 0, "evaluation.verbmem_max_new_tokens", "at least 1"),
        (["evaluation", "populations"], {"max_retain_patients": 3}, "evaluation.populations", "unknown key"),
        (["methods", "grad_diff", "seed"], 3, "methods.grad_diff.seed", "set by the study"),
    ],
)
def test_a_bad_key_of_a_muse_study_is_named_with_the_file(path, value, key, says):
    with pytest.raises(StudyConfigError, match=re.escape(f"my.yaml: key '{key}'")) as info:
        parse_study(with_change(path, value), "my.yaml")
    assert says in str(info.value)


def test_scalability_takes_any_folds_and_a_protocol_is_muse_only():
    study = parse_study(with_change(["forget"], ["forget_3", "forget_1"], SCALABILITY), "s.yaml")
    assert study.protocol == "scalability" and study.forget == ["forget_3", "forget_1"]
    default = raw_study(SCALABILITY)
    del default["forget"]
    assert parse_study(default, "s.yaml").forget == FOLDS  # every fold when none are named
    amnesia = yaml.safe_load((STUDIES / "tiny.yaml").read_text())
    assert parse_study(amnesia, "t.yaml").benchmark == "amnesia"
    with pytest.raises(StudyConfigError, match=re.escape("t.yaml: key 'protocol'")):
        parse_study({**amnesia, "protocol": "scalability"}, "t.yaml")


def test_a_method_that_cannot_train_on_raw_text_is_refused_by_key():
    raw = with_change(["methods"], {"idk": {"method": "idk_dpo"}})
    with pytest.raises(StudyConfigError, match=r"key 'methods\.idk\.method'.*raw text"):
        validate_study(parse_study(raw, "my.yaml"))


def test_a_data_folder_without_the_protocol_folds_is_refused_by_key(tmp_path):
    from medunlearn.muse.build import build_muse_folder

    folder = build_muse_folder(tmp_path / "muse", articles=5, seed=0)
    readme = (folder / "README.md").read_text()
    kept = re.sub(r"- config_name: sust\n  data_files:\n(  - split: .*\n    path: .*\n)+", "", readme)
    assert kept != readme
    (folder / "README.md").write_text(kept)
    study = parse_study(with_change(["data"], {"path": str(folder)}), str(tmp_path / "s.yaml"))
    with pytest.raises(StudyConfigError, match=r"key 'data\.path'.*no config 'sust'"):
        validate_study(study)
    scalability = parse_study(with_change(["data"], {"path": str(folder)}, SCALABILITY), "s.yaml")
    grid = validate_study(scalability)  # scal is there: the folds' sizes are read from the folder
    assert [c.fold_documents for c in grid.cells[:4]] == [5, 10, 15, 20]


def test_the_shipped_files_validate_with_four_folds_two_methods_two_seeds():
    for path, protocol in ((SCALABILITY, "scalability"), (SUSTAINABILITY, "sustainability")):
        study = load_study(path)
        assert study.benchmark == "muse" and study.protocol == protocol
        assert study.model["model_name_or_path"] == "tiny-llama" and study.forget == FOLDS
        grid = validate_study(study)  # the data is built by the study
        assert len(grid.cells) == len(study.methods) * 4 * len(study.seeds) == 16
        assert all(cell.config["data_format"] == "text" for cell in grid.cells)


def chains(grid) -> dict:
    """(label, seed) -> that chain's cells in request order."""
    found = {}
    for cell in grid.cells:
        found.setdefault((cell.label, cell.seed), []).append(cell)
    return found


def test_sustainability_request_k_starts_from_request_k_minus_1_and_forgets_fold_k():
    study = load_study(SUSTAINABILITY)
    grid = validate_study(study)
    for cells in chains(grid).values():
        assert [c.request for c in cells] == [1, 2, 3, 4]
        assert [c.corpus for c in cells] == [f"sust/{fold}" for fold in FOLDS]
        assert cells[0].start_model == "finetune/model" and cells[0].previous is None
        for before, after in zip(cells, cells[1:]):
            assert after.start_model == f"cells/{before.name}/model" and after.previous == before.name
    scalability = validate_study(load_study(SCALABILITY))
    for cells in chains(scalability).values():  # every scalability fold starts from the target
        assert [c.corpus for c in cells] == [f"scal/{fold}" for fold in FOLDS]
        assert {c.start_model for c in cells} == {"finetune/model"} and {c.request for c in cells} == {None}


def fingerprints(raw: dict) -> dict:
    return {cell.name: cell.fingerprint for cell in validate_study(parse_study(raw, "s.yaml")).cells}


def test_a_request_fingerprint_holds_its_predecessors_and_nothing_later():
    base = fingerprints(raw_study())
    fewer = fingerprints(with_change(["forget"], FOLDS[:2]))  # requests 3 and 4 dropped: 1 and 2 unchanged
    assert fewer == {name: fp for name, fp in base.items() if name.split("-")[1] in FOLDS[:2]}
    one_seed = fingerprints(with_change(["seeds"], [0]))  # another chain's seed leaves this one alone
    assert one_seed == {name: fp for name, fp in base.items() if name.endswith("-s0")}
    changed = fingerprints(with_change(["methods", "npo", "learning_rate"], 5.0e-3))
    for name, fp in base.items():
        assert (changed[name] != fp) == name.startswith("npo-")
    other_fold = with_change(["forget"], FOLDS)
    other_fold["protocol"] = "scalability"  # the same folds unlearned from the target instead
    scal = fingerprints(other_fold)
    assert all(scal[name] != fp for name, fp in base.items())


def test_sustainability_phases_run_each_request_after_the_one_before():
    study = load_study(SUSTAINABILITY)
    grid = validate_study(study)
    context = StudyContext("/study", "/study/data", study.model, {"runner": {}}, threads=1)
    phases = plan_muse_phases(study, grid, context, workers=2, finetune_threads=5)
    kinds = [[type(job) for job in phase.jobs] for phase in phases]
    assert kinds[:3] == [[MuseFinetuneJob], [MuseFinetuneJob], [MuseEvaluationJob]]
    assert [job.role for phase in phases[:2] for job in phase.jobs] == ["target", "retain"]
    assert phases[0].jobs[0].context.threads == 5  # a fine-tune alone, with every core
    assert phases[2].jobs[0].retain_outputs is None  # the retain model's evaluation writes the reference
    assert (
        isinstance(phases[3].jobs[0], MuseEvaluationJob) and phases[3].jobs[0].model_dir == "finetune/model"
    )
    phase_of = {job.name: index for index, phase in enumerate(phases) for job in phase.jobs}
    for cells in chains(grid).values():
        for request, cell in enumerate(cells, start=1):
            assert phase_of[cell.name] == 2 + request
            job = next(j for j in phases[2 + request].jobs if j.name == cell.name)
            assert job.forget == f"sust/forget_{request}" and job.start_model == cell.start_model
    for phase in phases:
        for job in phase.jobs:
            assert pickle.loads(pickle.dumps(job)) == job
    scal = load_study(SCALABILITY)
    scal_phases = plan_muse_phases(scal, validate_study(scal), context, workers=2, finetune_threads=5)
    assert len(scal_phases) == 4 and len(scal_phases[3].jobs) == 1 + 16  # the target's evaluation + cells


def test_the_chain_played_with_planted_training(tmp_path, monkeypatch):
    """Each request's job, run as the runner runs it, unlearns fold k from the folder request k - 1 wrote."""
    import medunlearn.study.muse_stages as muse_stages
    import medunlearn.unlearn.run as unlearn_run

    calls = []

    def planted_unlearning(config, model_args, data_args):
        start = Path(model_args.model_name_or_path)
        lineage = (start / "lineage.txt").read_text()  # fails unless the start model was written before
        calls.append((str(start), data_args.forget, data_args.benchmark))
        out = Path(config.output_dir)
        out.mkdir(parents=True)
        (out / "lineage.txt").write_text(f"{lineage} > {data_args.forget}")

    monkeypatch.setattr(unlearn_run, "run_unlearning", planted_unlearning)
    monkeypatch.setattr(muse_stages, "evaluate_muse_stage", lambda *args: None)
    (tmp_path / "finetune" / "model").mkdir(parents=True)
    (tmp_path / "finetune" / "model" / "lineage.txt").write_text("target")
    study = load_study(SUSTAINABILITY)
    grid = validate_study(study)
    context = StudyContext(str(tmp_path), str(tmp_path / "data"), study.model, {"runner": {}}, threads=None)
    phases = plan_muse_phases(study, grid, context, workers=1, finetune_threads=1)
    monkeypatch.chdir(tmp_path)
    for phase in phases[3:]:
        for job in phase.jobs:
            if (
                isinstance(job, MuseCellJob)
                and job.name.startswith("grad_diff-")
                and job.name.endswith("-s1")
            ):
                run_job(job)
    assert calls == [
        ("finetune/model", "sust/forget_1", "muse"),
        ("cells/grad_diff-forget_1-s1/model", "sust/forget_2", "muse"),
        ("cells/grad_diff-forget_2-s1/model", "sust/forget_3", "muse"),
        ("cells/grad_diff-forget_3-s1/model", "sust/forget_4", "muse"),
    ]
    last = tmp_path / "cells" / "grad_diff-forget_4-s1" / "model" / "lineage.txt"
    assert last.read_text() == "target > sust/forget_1 > sust/forget_2 > sust/forget_3 > sust/forget_4"


def test_a_sustainability_subset_keeps_every_earlier_request():
    study = load_study(SUSTAINABILITY)
    with pytest.raises(InputError, match="run forget_1, forget_2, forget_3"):
        subset_muse_grid(study, validate_study(study), None, ["forget_3"])
    grid = subset_muse_grid(study, validate_study(study), ["npo"], ["forget_1", "forget_2"])
    assert sorted(c.name for c in grid.cells) == sorted(
        f"npo-forget_{k}-s{s}" for k in (1, 2) for s in (0, 1)
    )
    scal = load_study(SCALABILITY)
    subset = subset_muse_grid(scal, validate_study(scal), None, ["forget_3"])
    assert {c.fold for c in subset.cells} == {"forget_3"}


def test_the_target_trains_on_every_fold_and_the_retain_model_on_none(tmp_path):
    from medunlearn.muse.build import build_muse_folder
    from medunlearn.muse.data import load_muse_split
    from medunlearn.muse.finetune import folder_texts, training_texts

    folder = build_muse_folder(tmp_path / "muse", articles=5, seed=0)

    def texts(config, split):
        return {row["text"] for row in load_muse_split(folder, config, split)}

    folds = set().union(*(texts("sust", fold) for fold in FOLDS))
    retained = texts("raw", "retain1") | texts("raw", "retain2")
    target, retain = set(training_texts(folder, "target")), set(training_texts(folder, "retain"))
    assert len(folds) == 20 and target == folds | retained and retain == retained
    assert not retain & (folds | texts("privleak", "forget") | texts("raw", "holdout"))
    every = set(folder_texts(folder))  # tiny-llama's tokenizer: every evaluation text too
    assert target <= every and texts("raw", "holdout") <= every
    assert {row["question"] for row in load_muse_split(folder, "knowmem", "retain_qa")} <= every
