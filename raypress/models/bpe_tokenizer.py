"""Byte-level BPE tokenizers: trained on a corpus with the ``tokenizers`` library, or loaded from a
model directory (ours or a Hugging Face checkpoint's ``tokenizer.json``).

Why byte-level: any input string round-trips exactly (no unknown token), which a model trained
for minutes on a small curated corpus needs, since serving will see text it never saw.

Files written beside the weights are the ones ``AutoTokenizer.from_pretrained`` reads:
``tokenizer.json`` (the whole tokenizer) and ``tokenizer_config.json`` (which special token is
BOS/EOS/padding, the chat template, the context length). Our own vocabulary reserves
``<|endoftext|>`` (BOS and EOS: the separator between packed documents, GPT-2 style),
``<|pad|>`` and the ChatML markers ``<|im_start|>`` / ``<|im_end|>`` that the chat template uses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"  # where transformers >= 4.43 may keep the template

ENDOFTEXT = "<|endoftext|>"
PAD = "<|pad|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (ENDOFTEXT, PAD, IM_START, IM_END)  # ids 0..3 of a tokenizer trained here

# ChatML, as Qwen and many small chat models use it; rendered by ``BPETokenizer.apply_chat_template``
# and by transformers' ``apply_chat_template`` alike.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass
class BPETokenizer:
    """A ``tokenizers.Tokenizer`` plus what HF keeps beside it: special token roles and chat template."""

    tokenizer: Tokenizer
    bos_token: str | None = ENDOFTEXT
    eos_token: str | None = ENDOFTEXT
    pad_token: str | None = PAD
    chat_template: str | None = CHAT_TEMPLATE
    model_max_length: int | None = None

    @property
    def vocab_size(self) -> int:
        """Size including added (special) tokens: the model's embedding needs this many rows."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def token_id(self, token: str | None) -> int | None:
        return None if token is None else self.tokenizer.token_to_id(token)

    @property
    def bos_token_id(self) -> int | None:
        return self.token_id(self.bos_token)

    @property
    def eos_token_id(self) -> int | None:
        return self.token_id(self.eos_token)

    @property
    def pad_token_id(self) -> int | None:
        return self.token_id(self.pad_token)

    @property
    def stop_token_ids(self) -> list[int]:
        """Ids that end a generation: EOS, and ``<|im_end|>`` when the vocabulary has it (chat turns)."""
        ids = [self.eos_token_id, self.token_id(IM_END) if IM_END in self.tokenizer.get_vocab() else None]
        return list(dict.fromkeys(i for i in ids if i is not None))

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids; special tokens written in ``text`` (e.g. ``<|im_start|>``) map to their ids.

        ``add_special_tokens`` applies the tokenizer's post-processor (a Mixtral tokenizer adds
        ``<s>``; ours adds nothing)."""
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = True) -> list[list[int]]:
        """Many texts at once (parallel in Rust)."""
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=add_special_tokens)]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, messages: Sequence[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """The prompt text for a chat (list of ``{"role", "content"}``), rendered as transformers does
        (sandboxed Jinja2, ``trim_blocks`` / ``lstrip_blocks``)."""
        if not self.chat_template:
            raise ValueError("this tokenizer has no chat template")
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        return env.from_string(self.chat_template).render(
            messages=list(messages), add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token or "", eos_token=self.eos_token or "",
        )

    def save(self, path: str | Path) -> None:
        """Write ``tokenizer.json`` and ``tokenizer_config.json`` into directory ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.tokenizer.save(str(path / TOKENIZER_FILE))
        config: dict[str, Any] = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            "pad_token": self.pad_token,
            "unk_token": None,
            "add_bos_token": False,
            "add_eos_token": False,
            "clean_up_tokenization_spaces": False,
            "chat_template": self.chat_template,
        }
        if self.model_max_length is not None:
            config["model_max_length"] = self.model_max_length
        (path / CONFIG_FILE).write_text(json.dumps(config, indent=2))


def new_byte_level_bpe(split_digits: bool = False) -> Tokenizer:
    """An untrained byte-level BPE (GPT-2 pre-tokenization: no prefix space, bytes as symbols).

    ``split_digits``: every digit its own token (as Llama and Mistral do), so a number is never
    one opaque merge — what a small model doing arithmetic needs."""
    tokenizer = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                               if split_digits else byte_level)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    return tokenizer


def _capped(texts: Iterable[str | None], max_chars: int | None) -> Iterator[str]:
    """The texts, skipping empty ones, until ``max_chars`` characters have been given."""
    seen = 0
    for text in texts:
        if not text:
            continue
        if max_chars is not None and seen >= max_chars:
            return
        yield text
        seen += len(text)


def train_bpe_tokenizer(
    texts: Iterable[str | None],
    vocab_size: int = 4096,
    min_frequency: int = 2,
    max_chars: int | None = None,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
    split_digits: bool = False,
) -> BPETokenizer:
    """Train a byte-level BPE on ``texts`` (stops reading after ``max_chars`` characters).

    The vocabulary holds the special tokens first, then the 256 byte symbols, then merges up to
    ``vocab_size`` (fewer when the corpus has no more pairs seen ``min_frequency`` times).
    """
    if vocab_size < len(special_tokens) + 256:
        raise ValueError(f"vocab_size {vocab_size} cannot hold {len(special_tokens)} special tokens and 256 bytes")
    tokenizer = new_byte_level_bpe(split_digits)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_capped(texts, max_chars), trainer=trainer)
    return BPETokenizer(tokenizer)


def _token_content(value: Any) -> str | None:
    """A special token as tokenizer_config.json may spell it: a string or an AddedToken dict."""
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


def _chat_template(config: dict[str, Any], path: Path) -> str | None:
    template = config.get("chat_template")
    if isinstance(template, list):  # several named templates: take "default", else the first
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    if template is None and (path / CHAT_TEMPLATE_FILE).exists():
        template = (path / CHAT_TEMPLATE_FILE).read_text()
    return template


def has_tokenizer(path: str | Path) -> bool:
    path = Path(path)
    return (path / TOKENIZER_FILE).is_file() or (path.is_file() and path.name.endswith(".json"))


def load_tokenizer(path: str | Path) -> BPETokenizer:
    """Load from a directory holding ``tokenizer.json`` (+ optional ``tokenizer_config.json``), or
    from a ``tokenizer.json`` file. Special token roles come from the config when present; a bare
    ``tokenizer.json`` of ours gets ``<|endoftext|>`` / ``<|pad|>`` if its vocabulary has them."""
    path = Path(path)
    directory, file = (path.parent, path) if path.is_file() else (path, path / TOKENIZER_FILE)
    if not file.is_file():
        raise FileNotFoundError(
            f"no {TOKENIZER_FILE} in {directory} (sentencepiece-only checkpoints are not supported)")
    tokenizer = Tokenizer.from_file(str(file))
    config_file = directory / CONFIG_FILE
    if config_file.is_file():
        config = json.loads(config_file.read_text())
        max_len = config.get("model_max_length")
        return BPETokenizer(
            tokenizer,
            bos_token=_token_content(config.get("bos_token")),
            eos_token=_token_content(config.get("eos_token")),
            pad_token=_token_content(config.get("pad_token")),
            chat_template=_chat_template(config, directory),
            model_max_length=max_len if isinstance(max_len, int) and max_len < 10**9 else None,
        )
    vocab = tokenizer.get_vocab()
    known = ENDOFTEXT if ENDOFTEXT in vocab else None
    return BPETokenizer(
        tokenizer, bos_token=known, eos_token=known, pad_token=PAD if PAD in vocab else None,
        chat_template=CHAT_TEMPLATE if IM_START in vocab and IM_END in vocab else None,
    )
