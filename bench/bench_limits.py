"""Bench: this machine's limits — the matmul peak per dtype, and each pass's share of it (docs/scaling.md).

First the peak: ``torch.matmul`` on square fp32 and bf16 matrices (512, 1024, 2048; a size whose single
product would take over ``--max-call-seconds`` at the rate of the size below is skipped), one thread and all
threads; the peak of a (dtype, threads) is the best size.

Then each pass, on a tiny-but-real-shape Llama built from ``LlamaConfig`` (hidden 512, MLP 1536, 8 layers,
8 heads, 4 key/value heads, vocabulary 5,120, tied embeddings: 27.8M parameters, random weights), in fp32
and bf16, at ``--threads``:

- teacher-forced scoring: one forward with logits over a batch of full sequences;
- decoding step (raw): one forward of one new token per row against a KV cache of the prompt;
- decoding step (``greedy_generate``): the library's loop (``model.generate``), per generated token step;
- training step: forward, backward and an AdamW step;
- embedding: all-MiniLM-L6-v2 (the shipped one) encoding real PubMedQA sentences;
- mining pairs stage (fp32 only): ``mine_pairs_with_counts`` on those sentences as claims, embedding included.

FLOPs [ours], counting multiply-adds as 2 and only the matrix products (norms, softmax, activations and the
optimizer are left out):

- forward: ``2 · P · tokens + 4 · L · d · Σ context`` — ``P`` the parameters of every linear layer, the LM
  head included (for the Llama: 27.8M, the tied embedding counted once, as the head), ``L`` layers, ``d`` the
  attention width (heads × head size), and ``Σ context`` the sum over scored positions of the keys each one
  attends to: ``T²`` per sequence of ``T`` in a full forward (the SDPA kernel computes the whole square under
  a causal mask), the cache length per token in a decoding step. Padding counts: it is computed.
- training: 3 × forward (the backward is twice the forward);
- mining: the embedding's forward plus ``2 · n² · dim`` per domain of ``n`` claims for exact search.

Timing: ``--rounds`` rounds; in each, the peak at the pass's dtype is measured again just before the pass,
so each share of peak is a ratio of two rates taken moments apart (the machine is shared: absolute rates
move with the load, the shares much less). Reported: the median over rounds. The load (``os.getloadavg``)
is printed with the table. Nothing is asserted.

    python bench/bench_limits.py [--threads 1] [--rounds 3] [--dtypes float32,bfloat16] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
ABSTRACTS = ROOT / ".." / "shared" / "data" / "pubmedqa" / "ori_pqal.json"
LLAMA = {
    "hidden_size": 512,
    "intermediate_size": 1536,
    "num_hidden_layers": 8,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "vocab_size": 5120,
}


def timed(function, min_seconds: float = 0.0):
    """Seconds per call of ``function`` (repeated until ``min_seconds`` have passed; at least once)."""
    calls, start = 0, time.perf_counter()
    while True:
        function()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls


def matmul_rate(size: int, dtype, min_seconds: float = 0.3) -> float:
    """FLOP/s of ``torch.matmul`` on two ``size × size`` matrices of ``dtype`` (one warm-up call)."""
    import torch

    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    torch.matmul(a, b)
    return 2 * size**3 / timed(lambda: torch.matmul(a, b), min_seconds)


def matmul_peaks(dtypes, thread_counts, sizes=(512, 1024, 2048), max_call_seconds: float = 5.0) -> list[dict]:
    """One row per (dtype, threads, size): the matmul rate, or ``None`` where the size was skipped."""
    import torch

    rows = []
    for threads in thread_counts:
        torch.set_num_threads(threads)
        for dtype in dtypes:
            rate = None
            for size in sizes:
                if rate is not None and 2 * size**3 / rate > max_call_seconds:
                    rows.append({"dtype": str(dtype), "threads": threads, "size": size, "rate": None})
                    continue
                rate = matmul_rate(size, dtype)
                rows.append({"dtype": str(dtype), "threads": threads, "size": size, "rate": rate})
    return rows


def bench_llama(dtype):
    """The 27.8M-parameter Llama of the docstring, random weights, in ``dtype``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**LLAMA, tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(config).to(dtype).eval()


def linear_parameters(model) -> int:
    """Parameters of every ``nn.Linear`` (what the ``2 · P`` of a forward multiplies)."""
    import torch

    return sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))


def forward_flops(parameters: int, tokens: int, layers: int, width: int, context_sum: int) -> float:
    """``2 · P · tokens + 4 · L · d · Σ context`` (module docstring) [ours]."""
    return 2 * parameters * tokens + 4 * layers * width * context_sum


def llama_passes(dtype, batch: int, length: int, new_tokens: int) -> dict:
    """Seconds and FLOPs of the Llama passes in ``dtype``: a dict name -> (run, flops, tokens)."""
    import torch

    from medunlearn.generation import greedy_generate

    model = bench_llama(dtype)
    cfg = model.config
    parameters, width, layers = linear_parameters(model), cfg.hidden_size, cfg.num_hidden_layers
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, cfg.vocab_size, (batch, length), generator=generator)
    tokens = batch * length
    full = forward_flops(parameters, tokens, layers, width, batch * length * length)

    def teacher_forced():
        with torch.inference_mode():
            model(input_ids=ids).logits.float()

    with torch.inference_mode():
        prefill = model(input_ids=ids, use_cache=True)
    step_input = ids[:, -1:]

    def decode_step():
        cache = prefill.past_key_values
        with torch.inference_mode():
            model(input_ids=step_input, cache=cache, use_cache=True).logits.float()
            cache.crop(-1)  # the next call sees the same cache length

    step = forward_flops(parameters, batch, layers, width, batch * (length + 1))
    prompts = ids.tolist()

    def generate():  # eos = vocab size: never produced, so every row makes all its tokens
        greedy_generate(model, prompts, 0, [cfg.vocab_size], new_tokens)

    # The generation's steps: the prefill, then new_tokens - 1 steps of one token, per row.
    generate_flops = full + sum(
        forward_flops(parameters, batch, layers, width, batch * (length + s)) for s in range(1, new_tokens)
    )
    return {
        "teacher-forced scoring": (teacher_forced, full, tokens),
        "decoding step (raw forward)": (decode_step, step, batch),
        f"generation, greedy_generate ({new_tokens} tokens)": (generate, generate_flops, batch * new_tokens),
        "training step (AdamW)": (training_step(model, ids), 3 * full, tokens),
    }


def training_step(model, ids):
    """A closure: one forward, backward and AdamW step on ``ids`` (labels = inputs)."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def step():
        model.train()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        model.eval()

    return step


def pubmedqa_sentences(limit: int | None = None) -> list[tuple[str, str]]:
    """(pmid, sentence) of the shared PubMedQA abstracts, contexts and conclusions, distinct, ≥ 30 chars."""
    from bench_mining import real_sentences  # bench/ is the script's folder, first on sys.path

    return real_sentences(ABSTRACTS, limit)


def embedding_flops(encoder, texts, batch_size: int) -> tuple[float, int]:
    """(FLOPs, padded tokens) of encoding ``texts`` as sentence-transformers batches them (by length)."""
    import torch

    lengths = sorted((len(encoder.tokenizer(t, truncation=True)["input_ids"]) for t in texts), reverse=True)
    lengths = [min(n, encoder.max_seq_length) for n in lengths]
    bert = encoder[0].auto_model
    # The pooler sees one token a sentence: left out.
    pooler = [m for name, m in bert.named_modules() if "pooler" in name and isinstance(m, torch.nn.Linear)]
    parameters = linear_parameters(bert) - sum(m.weight.numel() for m in pooler)
    layers, width = bert.config.num_hidden_layers, bert.config.hidden_size
    flops, padded = 0.0, 0
    for start in range(0, len(lengths), batch_size):
        batch = lengths[start : start + batch_size]
        tokens = len(batch) * batch[0]
        padded += tokens
        flops += forward_flops(parameters, tokens, layers, width, len(batch) * batch[0] ** 2)
    return flops, padded


def sentence_passes(dtype, sentences: list[tuple[str, str]], batch_size: int, mining: bool) -> dict:
    """The MiniLM embedding pass (and, if ``mining``, the pairs stage) in ``dtype``: name -> (run, flops,
    tokens)."""
    import numpy as np
    import pandas as pd
    from sentence_transformers import SentenceTransformer

    from medunlearn.biodivergence.mining.pairs import MiningConfig, mine_pairs_with_counts
    from medunlearn.metrics.similarity import default_embedding_model_path

    path = str(default_embedding_model_path())
    encoder = SentenceTransformer(path, device="cpu", local_files_only=True).to(dtype)
    texts = [text for _, text in sentences]
    flops, padded = embedding_flops(encoder, texts, batch_size)

    def embed():
        encoder.encode(texts, batch_size=batch_size, convert_to_numpy=False, show_progress_bar=False)

    passes = {f"embedding, MiniLM ({len(texts):,} sentences)": (embed, flops, padded)}
    if not mining:
        return passes
    claims = pd.DataFrame(
        {
            "claim_id": [f"c{i:05d}" for i in range(len(sentences))],
            "pmid": [pmid for pmid, _ in sentences],
            "text": texts,
            "domain": [f"d{int(pmid) % 5}" for pmid, _ in sentences],
        }
    )
    sizes = np.bincount(claims["domain"].str[1:].astype(int).to_numpy(), minlength=5)
    search = float(sum(2 * int(n) ** 2 * encoder.get_embedding_dimension() for n in sizes))

    def mine():
        mine_pairs_with_counts(claims, MiningConfig(batch_size=batch_size))

    passes[f"mining pairs stage ({len(texts):,} claims, 5 domains)"] = (mine, flops + search, padded)
    return passes


def measure(passes: dict, dtype, threads: int, rounds: int, min_seconds: float) -> list[dict]:
    """Each pass ``rounds`` times, each just after a 1024² matmul peak of ``dtype``: its rate and share."""
    import torch

    torch.set_num_threads(threads)
    samples = {name: [] for name in passes}
    for run, _, _ in passes.values():  # warm-up: first-call allocations and lazy set-up are not the pass
        run()
    for _ in range(rounds):
        for name, (run, flops, _) in passes.items():
            peak = matmul_rate(1024, dtype)
            seconds = timed(run, min_seconds)
            samples[name].append((seconds, flops / seconds, flops / seconds / peak, peak))
    rows = []
    for name, (_, flops, tokens) in passes.items():
        seconds, rate, share, peak = (statistics.median(s[i] for s in samples[name]) for i in range(4))
        rows.append(
            {
                "pass": name,
                "dtype": str(dtype).removeprefix("torch."),
                "tokens": tokens,
                "gflop": flops / 1e9,
                "seconds": seconds,
                "gflops": rate / 1e9,
                "peak_gflops": peak / 1e9,
                "share": share,
                "shares": [s[2] for s in samples[name]],
            }
        )
    return rows


def header(threads: int) -> str:
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{time.strftime('%Y-%m-%d %H:%M')}, commit {commit} (working tree), {os.cpu_count()} CPUs, "
        f"load average {load}, passes at {threads} thread(s)"
    )


def print_peaks(rows: list[dict]) -> None:
    print("| dtype | threads | 512² | 1024² | 2048² | peak |")
    print("|---|---|---|---|---|---|")
    keys = sorted({(r["dtype"], r["threads"]) for r in rows}, key=lambda k: (k[1], k[0] != "torch.float32"))
    for dtype, threads in keys:
        rates = [r["rate"] for r in rows if (r["dtype"], r["threads"]) == (dtype, threads)]
        cells = [f"{r / 1e9:.1f}" if r else "skipped" for r in rates]
        best = max(r for r in rates if r) / 1e9
        print(f"| {dtype.removeprefix('torch.')} | {threads} | {' | '.join(cells)} | **{best:.1f}** |")
    print("(GFLOP/s of torch.matmul on square matrices)")


def print_passes(rows: list[dict]) -> None:
    print(
        "| pass | dtype | tokens | GFLOP | s per call | GFLOP/s | peak GFLOP/s (same round) | share of peak |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        spread = ", ".join(f"{s:.0%}" for s in r["shares"])
        print(
            f"| {r['pass']} | {r['dtype']} | {r['tokens']:,} | {r['gflop']:.2f} | {r['seconds']:.3f} | "
            f"{r['gflops']:.1f} | {r['peak_gflops']:.1f} | **{r['share']:.0%}** ({spread}) |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=1, help="threads of the passes (default 1)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtypes", default="float32,bfloat16", help="dtypes of the matmul peak")
    parser.add_argument("--pass-dtypes", default=None, help="dtypes of the passes (default: --dtypes)")
    parser.add_argument("--batch", type=int, default=8, help="sequences per Llama batch")
    parser.add_argument("--length", type=int, default=64, help="tokens per sequence (the prompt, decoding)")
    parser.add_argument("--new-tokens", type=int, default=16, help="tokens generated by greedy_generate")
    parser.add_argument("--sentences", type=int, default=256, help="sentences embedded")
    parser.add_argument("--claims", type=int, default=1000, help="claims of the mining pass (fp32)")
    parser.add_argument("--min-seconds", type=float, default=0.5, help="least time per measurement")
    args = parser.parse_args()

    import warnings

    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning)
    dtypes = [getattr(torch, name) for name in args.dtypes.split(",")]
    print(header(args.threads))
    print()
    peaks = matmul_peaks(dtypes, sorted({1, os.cpu_count() or 1}))
    print_peaks(peaks)
    rows = []
    for dtype in [getattr(torch, name) for name in (args.pass_dtypes or args.dtypes).split(",")]:
        torch.set_num_threads(args.threads)
        passes = llama_passes(dtype, args.batch, args.length, args.new_tokens)
        rows += measure(passes, dtype, args.threads, args.rounds, args.min_seconds)
        sentences = pubmedqa_sentences(max(args.sentences, args.claims))
        embedding = sentence_passes(dtype, sentences[: args.sentences], 64, mining=False)
        if dtype == torch.float32:  # the mining pass runs the library's fp32 embedding
            mining = sentence_passes(dtype, sentences[: args.claims], 64, mining=True)
            embedding[list(mining)[-1]] = list(mining.values())[-1]
        rows += measure(embedding, dtype, args.threads, args.rounds, args.min_seconds)
    print()
    print_passes(rows)
    print()
    print(f"after: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
