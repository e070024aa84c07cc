"""The construction pipeline end to end on a planted corpus: funnel counts, valid labels, resuming a killed
run to identical files, identical rebuilds, the CLI. Embeddings are a hashed bag of words (monkeypatched) so
the tests run in seconds; the real all-MiniLM-L6-v2 runs in the integration test."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

from medunlearn.biodivergence.mining import pipeline
from medunlearn.biodivergence.mining.labels import LabelConfig, LabellingIncompleteError
from medunlearn.biodivergence.mining.pairs import MiningConfig
from medunlearn.biodivergence.mining.pipeline import STAGES, MineConfig, mine_pool, read_jsonl
from medunlearn.biodivergence.schema import normalise_pool
from medunlearn.llm import BulkChat
from medunlearn.ontology.biodivergence import AXIS_IDS, CONFLICT_TYPE_IDS, NO_CONFOUNDER

_spec = importlib.util.spec_from_file_location("fake_llm", Path(__file__).with_name("fake_llm.py"))
fake_llm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fake_llm)

DRUGS = ["Metformin", "Atorvastatin", "Tamoxifen", "Cisplatin"]
PLACES = ["Spain", "China", "Brazil", "Kenya"]


def planted_abstracts() -> list[dict]:
    """40 abstracts (20 oncology by keywords, 20 of a user's own "cardiovascular" domain) whose claims about
    one drug reverse direction between articles and differ in population and place; then one exact and one
    near duplicate."""
    rng = np.random.default_rng(0)
    vocabulary = [f"{a}{b}{c}" for a in "bdfgklmprst" for b in "aeiou" for c in ("n", "ra", "lo", "vi")]
    records = []
    for i in range(40):
        background = " ".join(rng.choice(vocabulary, 45)) + "."  # each abstract its own words
        drug = DRUGS[i % 4]
        direction = "increased" if (i // 4) % 2 else "decreased"
        population = "children" if i % 3 else "elderly adults"
        disease = "breast cancer" if i < 20 else "heart failure"
        record = {
            "pmid": str(1000 + i),
            "title": f"{drug} and outcomes in {disease}: study {i}",
            "sections": [
                {"label": "background", "text": background.capitalize()},
                {
                    "label": "methods",
                    "text": f"We enrolled {100 + i} patients with {disease} in {PLACES[i % 4]}.",
                },
                {
                    "label": "results",
                    "text": f"{drug} {direction} overall survival in {population} with {disease} compared "
                    f"with placebo (p < 0.05). The mean follow-up was {12 + i} months.",
                },
                {
                    "label": "conclusions",
                    "text": f"In conclusion, {drug} was associated with {direction} mortality in "
                    f"{PLACES[i % 4]} in study {i}.",
                },
            ],
            "year": 2000 + i % 20,
        }
        if i >= 20:
            record["domain"] = "cardiovascular"
        records.append(record)
    records.append(dict(records[0], pmid="2000"))  # the same text under another id: an exact duplicate
    near = json.loads(json.dumps(records[1]))
    near["pmid"] = "2001"
    near["sections"][3]["text"] = near["sections"][3]["text"].replace("In conclusion", "To conclude")
    records.append(near)
    return records


@pytest.fixture()
def corpus(tmp_path) -> Path:
    path = tmp_path / "abstracts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in planted_abstracts()))
    return path


def hashed_embeddings(texts, model=None, batch_size=64, show_progress=False):
    """Bag of words hashed into 256 dims, L2-normalised: similar claims are near, deterministic, instant."""
    vectors = np.zeros((len(texts), 256), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vectors[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 256] += 1.0
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)


@pytest.fixture(autouse=True)
def fast_embeddings(request, monkeypatch):
    if request.node.get_closest_marker("integration"):
        return  # the real all-MiniLM-L6-v2
    import medunlearn.biodivergence.mining.embed as embed

    monkeypatch.setattr(embed, "embed_texts", hashed_embeddings)


def config(**labels) -> MineConfig:
    return MineConfig(mining=MiningConfig(k=6, cap_per_domain=30), labels=LabelConfig(**labels))


def scripted_chat(cache: Path, **options) -> BulkChat:
    return BulkChat(
        fake_llm.ScriptedBackend(fake_llm.garbage_answer, **options), cache=cache, show_progress=False
    )


def digests(folder: Path, skip=("timings.json",)) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in skip and not p.name.startswith("llm-cache")
    }


def test_funnel_counts_are_consistent_and_labels_valid(corpus, tmp_path):
    out = tmp_path / "mined"
    result = mine_pool(
        [corpus], out, config(), llm=scripted_chat(tmp_path / "llm.sqlite"), show_progress=False
    )
    assert result.resumed == []
    for name in (
        "abstracts.jsonl",
        "claims.jsonl",
        "domains.jsonl",
        "pairs.jsonl",
        "labels.jsonl",
        "labels.json",
        "pool.jsonl",
        "funnel.json",
        "funnel.md",
        "stages.json",
        "timings.json",
    ):
        assert (out / name).is_file(), name
    counts = json.loads((out / "stages.json").read_text())
    a, c, d, p, lab, pool = (counts[stage]["counts"] for stage in STAGES)
    assert (a["abstracts"], a["exact_duplicates"], a["near_duplicates"], a["kept"]) == (42, 1, 1, 40)
    assert c["abstracts"] == 40 and c["claims_after_dedup"] == c["claims"] - c["duplicate_claims"]
    assert c["abstracts_with_claims"] == 40 and c["claims"] >= 80  # a results and a conclusions claim each
    assert c["yield"] == 1.0 and c["claims_per_abstract"] == c["claims"] / 40
    assert sum(d["claims_per_domain"].values()) == c["claims_after_dedup"]
    assert d["abstracts_per_domain"] == {"oncology": 20, "cardiovascular": 20}  # the user's domain is kept
    assert p["candidates"] == p["same_article_dropped"] + p["outside_window"] + p["in_window"]
    assert p["in_window"] == p["capped"] + p["kept"]
    assert sum(v["kept"] for v in p["per_domain"].values()) == p["kept"] > 0
    assert lab["labels"] == sum(lab["by_source"].values()) and lab["by_source"]["heuristic"] == p["kept"]
    assert lab["llm_requests"] == p["kept"] == lab["by_source"]["llm"] + lab["llm_failed"]
    assert pool["pool_rows"] == lab["labels"] and pool["pairs"] == p["kept"]
    # the funnel table shows the paper's figures beside ours
    table = (out / "funnel.md").read_text()
    assert "| claim yield (abstracts with a claim) | 100.0% | 69.1% |" in table
    assert "| claims per abstract |" in table and "| 2.61 |" in table
    # every pool row is valid under the ontology, and no pair joins two claims of one article
    frame = normalise_pool(result.pool, "mined pool")
    assert (frame["article_a"] != frame["article_b"]).all()
    assert set(frame["domain"]) == {"oncology", "cardiovascular"}
    for row in frame.itertuples():
        assert row.conflict_type in CONFLICT_TYPE_IDS and set(row.axes) <= set(AXIS_IDS)
        assert row.dominant_confounder == NO_CONFOUNDER or row.dominant_confounder in row.axes
        assert row.evidence_a in row.claim_a and row.evidence_b in row.claim_b
    assert "1000" in set(frame["article_a"]) | set(frame["article_b"])
    assert frame["abstract_a"].str.len().gt(0).all()


def test_a_run_killed_in_a_stage_resumes_to_the_same_files(corpus, tmp_path, monkeypatch):
    whole = tmp_path / "whole"
    mine_pool([corpus], whole, config(), llm=scripted_chat(tmp_path / "whole.sqlite"), show_progress=False)

    out = tmp_path / "killed"
    original = pipeline._stage_pairs

    def killed(*args, **kwargs):
        original(*args, **kwargs)  # writes pairs.jsonl, then dies before the stage is recorded
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "_stage_pairs", killed)
    with pytest.raises(KeyboardInterrupt):
        mine_pool([corpus], out, config(), llm=scripted_chat(tmp_path / "killed.sqlite"), show_progress=False)
    assert sorted(json.loads((out / "stages.json").read_text())) == ["abstracts", "claims", "domains"]
    assert not list(out.glob(".*partial*"))  # every write was atomic
    monkeypatch.setattr(pipeline, "_stage_pairs", original)

    chat = scripted_chat(tmp_path / "killed.sqlite", fail_after=7)  # the LLM server goes away mid-stage
    with pytest.raises(LabellingIncompleteError, match="got no answer"):
        mine_pool([corpus], out, config(), llm=chat, show_progress=False)
    assert "labels" not in json.loads((out / "stages.json").read_text())

    resumed_chat = scripted_chat(tmp_path / "killed.sqlite")
    result = mine_pool([corpus], out, config(), llm=resumed_chat, show_progress=False)
    assert result.resumed == ["abstracts", "claims", "domains", "pairs"]
    assert resumed_chat.stats.cache_hits == 7  # the answers from before the server went away
    assert digests(out) == digests(whole)

    again = scripted_chat(tmp_path / "killed.sqlite")
    assert mine_pool([corpus], out, config(), llm=again, show_progress=False).resumed == list(STAGES)
    assert again.stats.calls == 0


def test_a_changed_setting_redoes_only_the_stages_after_it(corpus, tmp_path):
    out = tmp_path / "mined"
    mine_pool([corpus], out, config(), show_progress=False)
    before = read_jsonl(out / "claims.jsonl")
    result = mine_pool(
        [corpus], out, MineConfig(mining=MiningConfig(k=6, cap_per_domain=5)), show_progress=False
    )
    assert result.resumed == ["abstracts", "claims", "domains"]
    assert json.loads((out / "stages.json").read_text())["pairs"]["counts"]["kept"] <= 10
    assert read_jsonl(out / "claims.jsonl").equals(before)
    # a damaged output is noticed and redone
    (out / "pairs.jsonl").write_text("")
    assert mine_pool(
        [corpus], out, MineConfig(mining=MiningConfig(k=6, cap_per_domain=5)), show_progress=False
    ).resumed == ["abstracts", "claims", "domains"]


@pytest.mark.parametrize(
    ("change", "first_redone"),
    [
        ({"dedup_threshold": 0.5}, "abstracts"),
        ({"seed": 1}, "abstracts"),
        ({"fallback_domain": "general"}, "domains"),
        ({"keywords": {"oncology": ["tumour"]}}, "domains"),
        ({"mining": MiningConfig(k=6, cap_per_domain=30, max_similarity=0.9)}, "pairs"),
        ({"labels": LabelConfig(min_confidence=0.5)}, "labels"),
    ],
)
def test_each_setting_redoes_its_own_stage_and_every_later_one(corpus, tmp_path, change, first_redone):
    out = tmp_path / "mined"
    mine_pool([corpus], out, config(), show_progress=False)
    changed = dataclasses.replace(config(), **change)
    resumed = mine_pool([corpus], out, changed, show_progress=False).resumed
    assert resumed == list(STAGES[: STAGES.index(first_redone)])


def test_building_twice_gives_identical_files_and_the_audit_passes(corpus, tmp_path):
    from medunlearn.biodivergence.audit import audit_folder
    from medunlearn.biodivergence.build import PoolSource, build_biodivergence

    folders = []
    for name in ("one", "two"):
        source = PoolSource(abstracts=[corpus], mine=config())
        folder, stats = build_biodivergence(
            tmp_path / name, source, llm=scripted_chat(tmp_path / f"{name}.sqlite"), show_progress=False
        )
        folders.append(folder)
        assert (tmp_path / f"{name}-mining" / "pool.jsonl").is_file()
    assert digests(folders[0]) == digests(folders[1])
    assert digests(tmp_path / "one-mining") == digests(tmp_path / "two-mining")
    report = audit_folder(folders[0])
    assert report.ok, report.first_violation
    card = (folders[0] / "README.md").read_text()
    assert "## Construction funnel" in card and "| claims per abstract | 2.00 | 2.61 |" in card
    assert "| v1.0 pairs (train / dev / test) |" in card and "11,865 = 10,183 / 840 / 842" in card
    build = json.loads((folders[0] / "build.json").read_text())
    assert build["funnel"]["counts"]["abstracts"]["kept"] == 40
    assert stats.split_sizes["dev"] + stats.split_sizes["test"] > 0  # LLM labels reach dev/test


def test_cli_mine_and_build_from_abstracts(corpus, tmp_path, capsys):
    from medunlearn.cli import main

    out = tmp_path / "pool"
    mine = ["biodivergence", "mine", "--abstracts", str(corpus), "--out", str(out)]
    mine += ["--cap-per-domain", "20", "--neighbours", "6"]
    assert main(mine) == 0
    printed = capsys.readouterr().out
    assert "stage pairs: done in" in printed and "claims per abstract" in printed and "2.61" in printed
    assert "seconds per stage: abstracts" in printed
    assert main(mine) == 0  # the same command again: every stage is current
    assert "stage labels: current, skipped (resumed)" in capsys.readouterr().out

    build = tmp_path / "bd"
    assert (
        main(
            [
                "biodivergence",
                "build",
                "--abstracts",
                str(corpus),
                "--out",
                str(build),
                "--mine-dir",
                str(out),
                "--cap-per-domain",
                "20",
                "--neighbours",
                "6",
                "--eval-labels",
                "heuristic",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "v1.0 pairs (train / dev / test)" in printed
    assert main(["biodivergence", "audit", str(build)]) == 0


def test_cli_build_from_abstracts_without_a_labeller_refuses_before_writing_anything(
    corpus, tmp_path, capsys
):
    """Without an LLM labeller v1.0 would have no dev or test split: the build says so with exit 2, names both
    ways out, and writes nothing (neither the folder nor its mining folder)."""
    from medunlearn.cli import main

    out = tmp_path / "bd"
    assert main(["biodivergence", "build", "--abstracts", str(corpus), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--labeller BACKEND:MODEL" in err and "--eval-labels heuristic" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["abstracts.jsonl"]


def test_cli_build_with_eval_labels_heuristic_prints_splits_and_labelled_share(corpus, tmp_path, capsys):
    """Asked with --eval-labels heuristic, dev and test exist and hold heuristic labels only; the build prints
    the split sizes and the share of mined pairs with a usable label, and the audit passes and warns."""
    from medunlearn.biodivergence.audit import read_hub_folder
    from medunlearn.cli import main

    out = tmp_path / "bd"
    command = ["biodivergence", "build", "--abstracts", str(corpus), "--out", str(out)]
    command += ["--cap-per-domain", "30", "--neighbours", "6", "--eval-labels", "heuristic"]
    assert main(command) == 0
    printed = capsys.readouterr().out
    labels = read_jsonl(tmp_path / "bd-mining" / "labels.jsonl")
    usable = int((labels["confidence"].astype(float) >= 0.45).sum())
    assert f"pairs with a usable label: {usable} of {len(labels)} ({usable / len(labels):.1%};" in printed
    configs = read_hub_folder(out)["v1.0"]
    sizes = {split: len(frame) for split, frame in configs.items()}
    assert sizes["dev"] > 0 and sizes["test"] > 0
    assert f"v1.0 {sizes}" in printed and "dev/test labels: heuristic" in printed
    assert all((frame["label_source"] == "heuristic").all() for frame in configs.values())
    assert main(["biodivergence", "audit", str(out)]) == 0
    assert "WARN v1.0 dev/test hold" in capsys.readouterr().out


def test_cli_names_the_file_row_and_field_of_a_bad_record_and_writes_nothing(tmp_path, capsys):
    from medunlearn.cli import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"pmid": "1", "title": "t", "abstract": "A claim."})
        + "\n"
        + json.dumps({"pmid": "2", "title": "t"})
        + "\n"
    )
    out = tmp_path / "bd"
    command = [
        "biodivergence",
        "build",
        "--abstracts",
        str(bad),
        "--out",
        str(out),
        "--eval-labels",
        "heuristic",
    ]
    assert main(command) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl" in err and "2" in err and "abstract" in err and "Traceback" not in err
    assert not out.exists()
    assert not any(p.name.endswith(".partial") for p in tmp_path.rglob("*"))


@pytest.mark.integration
@pytest.mark.slow  # the real vLLM server (started once per session) and all-MiniLM-L6-v2 on 2 cores: minutes
def test_real_abstracts_through_the_vllm_server_to_an_audited_folder(shared_data, vllm_server, tmp_path):
    """60 real PubMedQA abstracts and 20 NCBI Disease ones, SmolLM2-135M as the labeller: every label valid,
    the audit passes, and a rerun sends no request."""
    from medunlearn.biodivergence.audit import audit_folder
    from medunlearn.biodivergence.build import PoolSource, build_biodivergence

    raw = json.loads((shared_data / "pubmedqa" / "ori_pqal.json").read_text())
    subset = tmp_path / "ori_pqal_subset.json"
    subset.write_text(json.dumps(dict(list(raw.items())[:60])))
    ncbi = (shared_data / "ncbi-disease" / "NCBIdevelopset_corpus.txt").read_text().split("\n\n")
    ncbi_subset = tmp_path / "NCBI_subset.txt"
    ncbi_subset.write_text("\n\n".join(ncbi[:20]) + "\n")
    mine = MineConfig(
        mining=MiningConfig(cap_per_domain=12),
        labels=LabelConfig(labeller=vllm_server.spec, llm_pairs_per_domain=6),
    )
    source = PoolSource(abstracts=[subset, ncbi_subset], mine=mine, mine_dir=tmp_path / "mining")
    folder, stats = build_biodivergence(tmp_path / "bd", source, show_progress=False)
    assert audit_folder(folder).ok
    report = json.loads((tmp_path / "mining" / "labels.json").read_text())["llm"]
    assert report["requests"] > 0 and report["labelled"] + report["failed"] == report["requests"]
    pool = normalise_pool(read_jsonl(tmp_path / "mining" / "pool.jsonl"), "mined pool")
    assert (pool["label_source"] == "llm").sum() == report["labelled"]
    again = mine_pool([subset, ncbi_subset], tmp_path / "mining", mine, show_progress=False)
    assert again.resumed == list(STAGES)
