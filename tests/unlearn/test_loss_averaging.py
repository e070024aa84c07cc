"""``loss_averaging``: every method's config has it; each choice equals a hand computation; the
``open-unlearning`` conventions select the reference's choice per method; the trainer counts the step's tokens
the way transformers counts ``num_items_in_batch``."""

from __future__ import annotations

import math
import typing

import pytest
import torch
from tiny_training import fixed_batch

from medunlearn.unlearn.config import UnlearningConfig, literal_choices
from medunlearn.unlearn.methods import METHODS
from medunlearn.unlearn.ops import average_tokens, kl_loss, nll_loss

# fixed_batch with row 1's first answer token masked: row 0 answers with p = 0.25, 0.5; row 1 with p = 0.8.
# Unequal answer lengths are what tells the two averages apart.
P_ROW0, P_ROW1 = (0.25, 0.5), (0.8,)
DISTRIBUTIONS = {  # answer position -> (next-token distribution, label)
    (0, 0): ((0.5, 0.25, 0.25), 1),
    (0, 1): ((0.2, 0.3, 0.5), 2),
    (1, 2): ((0.1, 0.8, 0.1), 1),
}


def uneven_batch():
    logits, labels = fixed_batch()
    labels = labels.clone()
    labels[1, 2] = -100
    return logits, labels


def by_hand(per_token, averaging, num_items=None):
    """Average ``per_token(distribution, label)`` over the answer tokens, written out."""
    rows = {0: [], 1: []}
    for (row, _), (distribution, label) in DISTRIBUTIONS.items():
        rows[row].append(per_token(distribution, label))
    if averaging == "sequence":
        return sum(sum(values) / len(values) for values in rows.values()) / len(rows)
    total = sum(sum(values) for values in rows.values())
    return total / (num_items if num_items is not None else sum(len(v) for v in rows.values()))


AVERAGINGS = [("sequence", None), ("token", None), ("token", 6.0)]


@pytest.mark.parametrize("config_class", [spec.load()[0] for spec in METHODS.values()], ids=str)
def test_every_method_config_has_the_field_with_both_choices(config_class, tmp_path):
    assert typing.get_args(typing.get_type_hints(config_class)["loss_averaging"]) == ("sequence", "token")
    assert literal_choices(config_class)["loss_averaging"] == ("sequence", "token")
    config = config_class(output_dir=str(tmp_path), use_cpu=True)
    assert config.loss_averaging == "sequence"  # today's behaviour stays the default
    assert config_class.reference_loss_averaging in ("sequence", "token")
    token = config_class(output_dir=str(tmp_path), use_cpu=True, loss_averaging="token")
    assert token.loss_averaging == "token"
    assert "loss_averaging" in config.method_hyperparameters()  # so the model card lists it


def test_an_unknown_choice_is_refused_by_name(tmp_path):
    from medunlearn.unlearn.errors import UnlearningInputError

    with pytest.raises(UnlearningInputError, match=r"UnlearningConfig\.loss_averaging must be one of"):
        UnlearningConfig(output_dir=str(tmp_path), loss_averaging="batch")


def test_the_open_unlearning_conventions_select_the_reference_choice_per_method(tmp_path):
    from medunlearn.unlearn.run import make_method_config

    # PDU under the preset needs retain_loss_eps, as the reference's config (test_reference_recipe.py).
    required = {"pdu": {"retain_loss_eps": 0.3}}
    chosen = {
        stem: make_method_config(
            stem, tmp_path, conventions="open-unlearning", use_cpu=True, **required.get(stem, {})
        ).loss_averaging
        for stem in METHODS
    }
    # OpenUnlearning d3d7cf9: one token mean (HF outputs.loss, utils.py WGA/SatImp/UNDIAL, ceu.py, pdu.py)
    # everywhere but RMU's per-sequence activation loss (rmu.py:108-117).
    assert chosen == {stem: ("sequence" if stem == "rmu" else "token") for stem in METHODS}
    assert make_method_config("grad_diff", tmp_path, use_cpu=True).loss_averaging == "sequence"
    assert make_method_config("grad_diff", tmp_path, conventions="medunlearn").loss_averaging == "sequence"
    explicit = make_method_config("wga", tmp_path, conventions="open-unlearning", loss_averaging="sequence")
    assert explicit.loss_averaging == "sequence"  # a field given by the caller wins over the preset


@pytest.mark.parametrize(("averaging", "num_items"), AVERAGINGS)
def test_nll_against_a_hand_computation(averaging, num_items):
    logits, labels = uneven_batch()
    expected = by_hand(lambda p, y: -math.log(p[y]), averaging, num_items)
    assert nll_loss(logits, labels, averaging, num_items).item() == pytest.approx(expected, abs=1e-6)


def test_the_two_choices_differ_on_uneven_answers_and_token_is_hf_outputs_loss():
    logits, labels = uneven_batch()
    sequence = (-(math.log(0.25) + math.log(0.5)) / 2 - math.log(0.8)) / 2
    token = -(math.log(0.25) + math.log(0.5) + math.log(0.8)) / 3
    assert nll_loss(logits, labels).item() == pytest.approx(sequence, abs=1e-6)
    assert nll_loss(logits, labels, "token").item() == pytest.approx(token, abs=1e-6)
    hf = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 3), labels[:, 1:].reshape(-1))
    assert nll_loss(logits, labels, "token").item() == pytest.approx(hf.item(), abs=1e-6)


@pytest.mark.parametrize(("averaging", "num_items"), AVERAGINGS)
def test_wga_and_satimp_against_a_hand_computation(averaging, num_items):
    from medunlearn.unlearn.satimp import satimp_loss
    from medunlearn.unlearn.wga import wga_loss

    logits, labels = uneven_batch()
    wga = by_hand(lambda p, y: p[y] ** 2.0 * math.log(p[y]), averaging, num_items)
    assert wga_loss(logits, labels, 2.0, averaging, num_items).item() == pytest.approx(wga, abs=1e-6)
    satimp = by_hand(lambda p, y: p[y] ** 5 * (1 - p[y]) * math.log(p[y]), averaging, num_items)
    got = satimp_loss(logits, labels, 5.0, 1.0, averaging, num_items).item()
    assert got == pytest.approx(satimp, abs=1e-6)


def _ce_u_token(p, y):
    others = [v for v in range(len(p)) if v != y]
    rest = sum(p[v] for v in others)
    return -sum(p[v] / rest * math.log(p[v]) for v in others)


@pytest.mark.parametrize(("averaging", "num_items"), AVERAGINGS)
def test_ce_u_against_a_hand_computation(averaging, num_items):
    from medunlearn.unlearn.ce_u import ce_u_loss

    logits, labels = uneven_batch()
    expected = by_hand(_ce_u_token, averaging, num_items)
    got = ce_u_loss(logits, labels, 0, averaging, num_items).item()
    assert got == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(("averaging", "num_items"), AVERAGINGS)
def test_undial_against_a_hand_computation(averaging, num_items):
    from medunlearn.unlearn.undial import undial_loss

    logits, labels = uneven_batch()
    beta = 1.5

    def token(p, y):  # target: the reference's (here the policy's own) logits, answer token lowered by β
        shifted = [math.log(pv) - (beta if v == y else 0.0) for v, pv in enumerate(p)]
        norm = sum(math.exp(z) for z in shifted)
        return -sum(math.exp(z) / norm * math.log(pv) for z, pv in zip(shifted, p))

    expected = by_hand(token, averaging, num_items)
    got = undial_loss(logits, logits.clone(), labels, beta, averaging, num_items).item()
    assert got == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(("averaging", "num_items"), AVERAGINGS)
def test_kl_against_a_hand_computation(averaging, num_items):
    logits, labels = uneven_batch()
    uniform = torch.zeros_like(logits)  # the reference's distribution: uniform over the 3 tokens

    def token(p, _):
        return sum(1 / 3 * (math.log(1 / 3) - math.log(pv)) for pv in p)

    expected = by_hand(token, averaging, num_items)
    assert kl_loss(logits, uniform, labels, averaging, num_items).item() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(("averaging", "num_items"), AVERAGINGS)
def test_pdu_flattening_against_a_hand_computation(averaging, num_items):
    from medunlearn.unlearn.pdu import logit_margin_flattening_loss

    logits, labels = uneven_batch()  # fixed_batch's logits at answer positions are log-probabilities

    def token(p, _):
        z = [math.log(pv) for pv in p]
        return (max(z) - sum(z) / len(z)) ** 2

    expected = by_hand(token, averaging, num_items)
    got = logit_margin_flattening_loss(logits, labels, averaging, num_items).item()
    assert got == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(("averaging", "num_items"), AVERAGINGS)
def test_rmu_activation_loss_against_a_hand_computation(averaging, num_items):
    from medunlearn.unlearn.rmu import activation_mse

    activations = torch.tensor([[[1.0, 3.0], [2.0, 2.0], [9.0, 9.0]], [[0.0, 4.0], [7.0, 7.0], [7.0, 7.0]]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    target = torch.tensor([1.0, 1.0])
    # (1/d)||a - c||^2 per position: row 0: (0 + 4)/2 = 2, (1 + 1)/2 = 1; row 1: (1 + 9)/2 = 5.
    expected = {"sequence": ((2 + 1) / 2 + 5) / 2, "token": (2 + 1 + 5) / (num_items or 3)}[averaging]
    got = activation_mse(activations, target, mask, averaging, num_items).item()
    assert got == pytest.approx(expected, abs=1e-6)


def test_average_tokens_ignores_masked_garbage_with_either_choice():
    values = torch.tensor([[1.0, 3.0, 1e6], [5.0, -1e6, 1e6]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    assert average_tokens(values, mask, "sequence").item() == pytest.approx(3.5)
    assert average_tokens(values, mask, "token").item() == pytest.approx(3.0)
    assert average_tokens(values, mask, "token", num_items=6.0).item() == pytest.approx(1.5)


# ------------------------------------------------------------------------------------------------------------
# The trainer: the step's token count, as transformers counts num_items_in_batch
# ------------------------------------------------------------------------------------------------------------


def _grad_diff_trainer(tiny_tokenizer, tmp_path, **fields):
    import importlib.util
    from pathlib import Path

    from medunlearn.models import build_tiny_llama
    from medunlearn.unlearn import GradDiffConfig, GradDiffTrainer

    spec = importlib.util.spec_from_file_location("unlearn_fixtures", Path(__file__).with_name("conftest.py"))
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    torch.manual_seed(0)
    args = GradDiffConfig(
        output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none", disable_tqdm=True, **fields
    )
    model = build_tiny_llama(tiny_tokenizer)
    return GradDiffTrainer(
        model,
        args,
        fixtures.qa_dataset({"p1", "p2"}),
        fixtures.qa_dataset({"p5"}),
        processing_class=tiny_tokenizer,
    )


def test_token_averaging_counts_every_micro_batch_of_the_step(tiny_tokenizer, tmp_path):
    trainer = _grad_diff_trainer(
        tiny_tokenizer, tmp_path, loss_averaging="token", per_device_train_batch_size=2
    )
    batches = list(trainer.get_train_dataloader())[:2]
    shares = trainer._get_num_items_in_batch(batches, torch.device("cpu"))
    for part in ("forget", "retain"):
        tokens = sum(int((batch[part]["labels"][:, 1:] != -100).sum()) for batch in batches)
        assert float(shares[part]) == pytest.approx(tokens / 2)  # one process, two micro-batches
    sequence = _grad_diff_trainer(tiny_tokenizer, tmp_path, per_device_train_batch_size=2)
    assert sequence._get_num_items_in_batch(batches, torch.device("cpu")) is None


def test_token_averaging_with_accumulation_equals_one_large_batch(tiny_tokenizer, tmp_path):
    """K micro-batches of the step divide by the step's token count: the step's loss and update are those of
    one batch holding them all (the accumulation analogue of the 2-process test)."""
    weights = {}
    for name, batch, accumulation in (("one", 4, 1), ("two", 2, 2)):
        trainer = _grad_diff_trainer(
            tiny_tokenizer,
            tmp_path / name,
            loss_averaging="token",
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=accumulation,
            max_steps=1,
            optim="sgd",  # the update is the gradient itself (Adam would magnify float noise near 0)
            learning_rate=1e-2,
            logging_steps=1,
            seed=0,
        )
        trainer.train()
        weights[name] = [p.detach().clone() for p in trainer.model.parameters()]
        weights[name + "_loss"] = next(e["loss"] for e in trainer.state.log_history if "loss" in e)
    assert weights["one_loss"] == pytest.approx(weights["two_loss"], abs=1e-5)
    for a, b in zip(weights["one"], weights["two"]):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
