"""The relearning attack on a tiny Llama: memorised, unlearned by gradient ascent, relearned on a share of the
forget QA; the part it did not relearn comes back (docs/attacks.md, "Relearning")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from tiny_training import qa_batch

from medunlearn.attacks.relearning import (
    AttackInputError,
    RelearnConfig,
    model_arguments_for,
    relearning_attack,
    relearning_sets,
    split_forget_share,
)
from medunlearn.evaluation.pipeline import evaluate_on_examples
from medunlearn.evaluation.runner import RunnerConfig

# Every answer shares the template "The scan of patient <name> showed ..." and differs in its finding. That
# shared part is what makes the recovery robust on a model this small: gradient ascent on all eight answers
# wrecks the template (and with it every answer's ROUGE-L), relearning two answers restores the template,
# and the template alone scores a ROUGE-L F1 of about 0.5 on the six answers that were not relearned. With
# these settings the similarity goes 0.83 (memorised) → 0.03 (gradient ascent) → 0.6 (5 relearning steps): the
# asserted recovery > 0 has a margin of about 0.58, far above any rounding or thread-count effect.
NAMES = ["Alder", "Birch", "Cedar", "Damson", "Elm", "Fir", "Gorse", "Hazel"]
FINDINGS = [
    "a right coronary occlusion",
    "a left lower lobe pneumonia",
    "an estrogen receptor positive carcinoma",
    "a stent thrombosis",
    "a pulmonary embolism",
    "a septic arthritis",
    "an aortic dissection",
    "a pericardial effusion",
]
RUNNER = RunnerConfig(max_new_tokens=16, progress=False)


def forget_examples() -> pd.DataFrame:
    n = len(NAMES)
    return pd.DataFrame(
        {
            "example_id": [f"forget_seen/q{i}" for i in range(n)],
            "population": "forget_seen",
            "qa_id": [f"q{i}" for i in range(n)],
            "patient_id": [f"p{i // 2}" for i in range(n)],
            "disease": "cardiovascular",
            "qa_type": ["factual", "reasoning"] * (n // 2),
            "question": [f"What did the scan of patient {name} show?" for name in NAMES],
            "answer": [f"The scan of patient {name} showed {f}." for name, f in zip(NAMES, FINDINGS)],
            "disease_keywords": [[] for _ in range(n)],
        }
    )


@pytest.fixture(scope="module")
def single_thread():
    """One torch thread: on a shared 2-core machine a tiny model trains ~30x faster than with two."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def memorised(tokenizer, examples, steps: int = 60):
    """A one-layer tiny Llama trained to recite the answers (the model before unlearning)."""
    import torch

    from medunlearn.models import TinyLlamaConfig, build_tiny_llama
    from medunlearn.unlearn.ops import nll_loss

    torch.manual_seed(0)
    small = TinyLlamaConfig(32, 64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    model = build_tiny_llama(tokenizer, small)
    batch = qa_batch(tokenizer, examples)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        loss = nll_loss(logits, batch["labels"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


@pytest.fixture(scope="module")
def unlearned_folder(tmp_path_factory, single_thread):
    """A tiny Llama that memorised the eight answers, then gradient ascent on all of them, saved."""
    import datasets

    from medunlearn.models import train_bpe_tokenizer
    from medunlearn.unlearn.grad_ascent import GradAscentConfig, GradAscentTrainer

    examples = forget_examples()
    tokenizer = train_bpe_tokenizer((examples["question"] + " " + examples["answer"]).tolist() * 4, 400)
    model = memorised(tokenizer, examples)
    root = tmp_path_factory.mktemp("relearn")
    model.save_pretrained(root / "before")
    tokenizer.save_pretrained(root / "before")
    config = GradAscentConfig(
        output_dir=str(root / "trainer"),
        use_cpu=True,
        bf16=False,
        max_steps=4,
        learning_rate=1e-2,
        per_device_train_batch_size=4,
        save_strategy="no",
        report_to="none",
        seed=0,
        disable_tqdm=True,
    )
    forget = datasets.Dataset.from_pandas(examples.drop(columns=["disease_keywords"]))
    GradAscentTrainer(model, config, forget, None, processing_class=tokenizer).train()
    model.save_pretrained(root / "unlearned")
    tokenizer.save_pretrained(root / "unlearned")
    return root


def _similarity(eval_dir) -> pd.Series:
    return pd.read_parquet(eval_dir / "per_example.parquet").set_index("example_id")["similarity"]


def test_relearning_a_share_of_the_forget_set_brings_back_the_rest(unlearned_folder, tmp_path):
    examples = forget_examples()
    train_rows, scored = relearning_sets(examples, RelearnConfig(share=0.25, seed=0))
    assert len(train_rows) == 2 and len(scored) == 6
    assert not set(train_rows["qa_id"]) & set(scored["qa_id"])
    before = evaluate_on_examples(
        str(unlearned_folder / "before"), scored, tmp_path / "before", runner_config=RUNNER
    )
    unlearned = evaluate_on_examples(
        str(unlearned_folder / "unlearned"), scored, tmp_path / "unl", runner_config=RUNNER
    )
    s_before, s_unlearned = (
        s["populations"]["forget_seen"]["all"]["similarity"] for s in (before, unlearned)
    )
    assert s_before > s_unlearned + 0.2, (
        "gradient ascent did not make the model forget: the test means nothing"
    )

    config = RelearnConfig(steps=(5,), share=0.25, learning_rate=3e-3, batch_size=2, seed=0)
    results = relearning_attack(
        unlearned_folder / "unlearned",
        train_rows,
        scored,
        tmp_path / "attack",
        config,
        runner_config=RUNNER,
        progress=False,
    )
    assert [r["steps"] for r in results] == [5]
    attacked = _similarity(tmp_path / "attack" / "relearn-k5")
    assert set(attacked.index) == set(scored["example_id"])  # scored only on QA it did not relearn
    recovered = attacked.mean() - s_unlearned
    assert recovered > 0, f"no recovery: {attacked.mean():.3f} vs {s_unlearned:.3f} after unlearning"


def test_one_run_through_the_steps_equals_a_separate_run_of_k_steps(unlearned_folder, tmp_path):
    """Constant learning rate, seeded data order, RNG restored after each evaluation: step 2 of a 4-step run
    is a 2-step run."""
    examples = forget_examples()
    train_rows, scored = relearning_sets(examples, RelearnConfig(share=0.25, seed=0))
    runs = {}
    for steps in ((2, 4), (2,)):
        config = RelearnConfig(steps=steps, learning_rate=3e-3, batch_size=1, seed=0)
        out = tmp_path / "-".join(map(str, steps))
        relearning_attack(
            unlearned_folder / "unlearned",
            train_rows,
            scored,
            out,
            config,
            runner_config=RUNNER,
            progress=False,
        )
        runs[steps] = pd.read_parquet(out / "relearn-k2" / "per_example.parquet")
    assert runs[(2, 4)]["generated_text"].tolist() == runs[(2,)]["generated_text"].tolist()
    np.testing.assert_allclose(runs[(2, 4)]["loss"], runs[(2,)]["loss"], rtol=1e-5)


def test_forget_share_is_seeded_and_leaves_rows_to_score():
    examples = forget_examples()
    first, rest = split_forget_share(examples, 0.25, seed=3)
    again, _ = split_forget_share(examples.sample(frac=1.0, random_state=1), 0.25, seed=3)
    assert sorted(first["qa_id"]) == sorted(again["qa_id"])  # row order does not matter
    assert len(first) == 2 and len(rest) == 6
    assert len(split_forget_share(examples, 0.99, seed=0)[1]) == 2  # one patient (two QA) is left to score
    with pytest.raises(AttackInputError, match="at least 2 forget patients"):
        split_forget_share(examples.head(2), 0.25, seed=0)  # two QA of one patient


def test_no_relearned_patient_is_scored():
    """By patient and QA id: a patient's reasoning answers restate their factual ones, so neither the
    relearned QA nor any other QA (seen or holdout) of a relearned patient may be scored as not relearned."""
    seen = forget_examples()
    holdout = seen.assign(
        example_id=[f"forget_holdout/h{i}" for i in range(len(seen))],
        population="forget_holdout",
        qa_id=[f"h{i}" for i in range(len(seen))],
    )
    examples = pd.concat([seen, holdout], ignore_index=True)
    for seed in range(5):
        train_rows, scored = relearning_sets(examples, RelearnConfig(share=0.5, seed=seed))
        assert set(train_rows["population"]) == {"forget_seen"}
        assert not set(train_rows["qa_id"]) & set(scored["qa_id"])
        assert not set(train_rows["patient_id"]) & set(scored["patient_id"])
        assert set(scored["population"]) == {"forget_seen", "forget_holdout"}
        assert (
            len(train_rows) == 4 and len(scored) == 8
        )  # 2 of 4 patients relearned; 2 × (2 seen + 2 holdout)


def test_config_rejects_bad_steps_and_data():
    assert RelearnConfig(steps=(20, 5, 5)).steps == (5, 20)
    with pytest.raises(AttackInputError, match="--relearn-steps"):
        RelearnConfig(steps=(0, 5))
    with pytest.raises(AttackInputError, match="--relearn-data"):
        RelearnConfig(data="everything")


@pytest.mark.parametrize("rate", [float("inf"), float("nan"), 0.0, -1e-3, "fast"])
def test_config_rejects_a_learning_rate_that_cannot_train(rate):
    """Python API and study files too (the option checks it at parse time): inf / nan would give NaN weights
    and a recovery of 0 that reads like a robust unlearning."""
    with pytest.raises(AttackInputError, match="--relearn-learning-rate"):
        RelearnConfig(learning_rate=rate)


def test_lora_adapter_is_relearned_through_lora_of_its_rank(tmp_path):
    (tmp_path / "adapter_config.json").write_text('{"r": 4, "lora_alpha": 8}')
    arguments = model_arguments_for(tmp_path)
    assert arguments.lora and (arguments.lora_r, arguments.lora_alpha) == (4, 8)
    assert not model_arguments_for(tmp_path / "missing").lora


def test_a_lora_unlearned_model_is_relearned_through_lora(unlearned_folder, tmp_path):
    from peft import LoraConfig, get_peft_model

    from medunlearn.models import load_model_and_tokenizer

    base, tokenizer = load_model_and_tokenizer(str(unlearned_folder / "unlearned"))
    adapter = get_peft_model(base, LoraConfig(r=2, lora_alpha=4, target_modules="all-linear"))
    adapter.save_pretrained(tmp_path / "adapter")
    tokenizer.save_pretrained(tmp_path / "adapter")
    train_rows, scored = relearning_sets(forget_examples(), RelearnConfig(share=0.25, seed=0))
    config = RelearnConfig(steps=(2,), learning_rate=3e-3, batch_size=2, seed=0)
    results = relearning_attack(
        tmp_path / "adapter",
        train_rows,
        scored,
        tmp_path / "attack",
        config,
        runner_config=RUNNER,
        progress=False,
    )
    assert results[0]["summary"]["populations"]["forget_seen"]["all"]["n"] == len(scored)
