"""The byte-level BPE tokenizer (train, encode/decode, special tokens, save/load, HF compatibility)
and the Ray-free pieces of `train_moe_lm`: packing, the learning-rate schedule, generation."""

from __future__ import annotations

import importlib.metadata
import json

import pyarrow as pa
import pytest
import torch

from raypress.models.bpe_tokenizer import (
    CHAT_TEMPLATE,
    ENDOFTEXT,
    IM_END,
    IM_START,
    PAD,
    SPECIAL_TOKENS,
    BPETokenizer,
    load_tokenizer,
    train_bpe_tokenizer,
)
from raypress.models.moe import MoEForCausalLM
from raypress.models.moe_checkpoint import save_moe
from raypress.models.moe_config import MoEConfig
from raypress.training.moe_lm import generate, generate_text, lr_at, pack_batch

TRICKY = [
    "Hello wörld — naïve café, 漢字 and emoji 🚀🙂",
    "def f(x):\n\treturn x  # two spaces\r\n\n\n   trailing   ",
    "control \x00\x01 chars and a lone \ufeff BOM",
    "",
]


@pytest.fixture(scope="module")
def descriptions() -> list[str]:
    """Real prose + markup: the long descriptions of installed packages, sorted for determinism."""
    texts = sorted(d.metadata.get_payload() or "" for d in importlib.metadata.distributions())
    texts = [t for t in texts if len(t) >= 500]
    assert len(texts) >= 40, "too few package descriptions installed"
    return texts


@pytest.fixture(scope="module")
def tokenizer(descriptions) -> BPETokenizer:
    return train_bpe_tokenizer(descriptions[::2], vocab_size=1024, max_chars=400_000)


def test_vocabulary_holds_specials_bytes_and_merges(tokenizer):
    assert tokenizer.vocab_size == 1024
    vocab = tokenizer.tokenizer.get_vocab()
    assert [vocab[t] for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) == (0, 0, 1)
    assert tokenizer.stop_token_ids == [0, 3]


def test_round_trip_of_real_and_tricky_text(tokenizer, descriptions):
    held_out = descriptions[1::2][:20]
    for text in held_out + TRICKY:
        assert tokenizer.decode(tokenizer.encode(text)) == text
    chars = sum(map(len, held_out))
    tokens = sum(map(len, tokenizer.encode_batch(held_out)))
    assert chars / tokens > 2.0  # merges learned on half the descriptions compress the other half


def test_special_tokens_in_text(tokenizer):
    ids = tokenizer.encode(f"first document{ENDOFTEXT}second")
    assert ids.count(tokenizer.eos_token_id) == 1
    assert tokenizer.decode(ids) == "first documentsecond"
    assert tokenizer.decode(ids, skip_special_tokens=False) == f"first document{ENDOFTEXT}second"
    assert tokenizer.encode("hi") == tokenizer.encode("hi", add_special_tokens=False)  # GPT-2 style: no BOS


def test_chat_template(tokenizer):
    prompt = tokenizer.apply_chat_template([{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": "Hi"}])
    assert prompt == f"{IM_START}system\nBe brief.{IM_END}\n{IM_START}user\nHi{IM_END}\n{IM_START}assistant\n"
    ids = tokenizer.encode(prompt)
    assert ids.count(2) == 3 and ids.count(3) == 2  # the markers are single special tokens


def test_save_load(tokenizer, tmp_path):
    tokenizer.model_max_length = 256
    tokenizer.save(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert (config["bos_token"], config["eos_token"], config["pad_token"]) == (ENDOFTEXT, ENDOFTEXT, PAD)
    loaded = load_tokenizer(tmp_path)
    text = "Install with pip install raypress, then run it."
    assert loaded.encode(text) == tokenizer.encode(text)
    assert (loaded.eos_token_id, loaded.pad_token_id, loaded.model_max_length) == (0, 1, 256)
    assert loaded.chat_template == CHAT_TEMPLATE
    bare = load_tokenizer(tmp_path / "tokenizer.json")  # the file alone: roles from the vocabulary
    assert (bare.eos_token_id, bare.pad_token_id, bare.chat_template) == (0, 1, CHAT_TEMPLATE)


def test_transformers_loads_the_saved_tokenizer(tokenizer, tmp_path):
    transformers = pytest.importorskip("transformers")
    tokenizer.save(tmp_path)
    hf = transformers.AutoTokenizer.from_pretrained(tmp_path)
    text = "A fast tokenizer — with unicode, 漢字."
    assert hf.encode(text) == tokenizer.encode(text)
    assert (hf.eos_token_id, hf.pad_token_id) == (tokenizer.eos_token_id, tokenizer.pad_token_id)
    messages = [{"role": "user", "content": "What is Ray?"}]
    rendered = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == tokenizer.apply_chat_template(messages)


def test_loads_hf_style_config(tokenizer, tmp_path):
    """HF checkpoints spell special tokens as AddedToken dicts and may keep the template apart."""
    tokenizer.tokenizer.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": {"content": ENDOFTEXT, "lstrip": False}, "eos_token": {"content": IM_END},
        "pad_token": None, "model_max_length": 1000000000000000019884624838656}))
    (tmp_path / "chat_template.jinja").write_text("{{ messages[0]['content'] }}")
    loaded = load_tokenizer(tmp_path)
    assert (loaded.bos_token_id, loaded.eos_token_id, loaded.pad_token_id) == (0, 3, None)
    assert loaded.model_max_length is None
    assert loaded.apply_chat_template([{"role": "user", "content": "x"}]) == "x"


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        load_tokenizer(tmp_path)
    with pytest.raises(ValueError, match="vocab_size"):
        train_bpe_tokenizer(["text"], vocab_size=100)


def test_max_chars_caps_the_training_text():
    texts = ["aaaa bbbb"] * 10 + ["zzzz yyyy"] * 10
    capped = train_bpe_tokenizer(texts, vocab_size=300, min_frequency=1, max_chars=50)
    full = train_bpe_tokenizer(texts, vocab_size=300, min_frequency=1)
    assert "zzzz" not in capped.tokenizer.get_vocab() and "zzzz" in full.tokenizer.get_vocab()


# ---------------------------------------------------------------------------------------------
# train_moe_lm's pieces that run without Ray


def test_pack_batch_joins_documents_with_eos(tokenizer):
    docs = ["The first document.", None, "", "A second, longer document about packing." * 3]
    out = pack_batch(pa.table({"text": docs}), tokenizer, "text", block=8)["input_ids"]
    stream = tokenizer.encode(docs[0]) + [0] + tokenizer.encode(docs[3]) + [0]
    assert out.dtype.name == "int32" and out.shape == (len(stream) // 8, 8)
    assert out.reshape(-1).tolist() == stream[: out.size]
    empty = pack_batch(pa.table({"text": ["tiny"]}), tokenizer, "text", block=64)["input_ids"]
    assert empty.shape == (0, 64)


def test_pack_batch_masks_prompts(tokenizer):
    """With a prompt column the prompt is read but never a target: labels -100 over it, ids elsewhere."""
    table = pa.table({"q": ["What is 2 + 3?\n", "Say hi.\n", None], "a": ["2 + 3 = 5", "hi", "lone answer"]})
    out = pack_batch(table, tokenizer, "a", block=4, prompt_key="q")
    ids, labels = out["input_ids"].reshape(-1).tolist(), out["labels"].reshape(-1).tolist()
    want_ids, want_labels = [], []
    for q, a in [("What is 2 + 3?\n", "2 + 3 = 5"), ("Say hi.\n", "hi"), ("", "lone answer")]:
        q_ids, a_ids = tokenizer.encode(q) if q else [], tokenizer.encode(a) + [0]
        want_ids += q_ids + a_ids
        want_labels += [-100] * len(q_ids) + a_ids
    assert ids == want_ids[: len(ids)] and labels == want_labels[: len(ids)]
    assert len(ids) == len(want_ids) // 4 * 4 and -100 in labels
    plain = pack_batch(table, tokenizer, "a", block=4)
    assert (plain["labels"] == plain["input_ids"]).all()


def test_lr_schedule():
    config = {"lr": 1e-3, "warmup_steps": 10, "min_lr_ratio": 0.1}
    assert lr_at(0, 0.0, config) == pytest.approx(1e-4)
    assert lr_at(9, 0.0, config) == pytest.approx(1e-3)
    assert lr_at(50, 0.5, config) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))
    assert lr_at(99, 1.0, config) == pytest.approx(1e-4)
    assert lr_at(5, 0.0, {**config, "warmup_steps": 0}) == pytest.approx(1e-3)


class _CountingLM(torch.nn.Module):
    """Predicts token ``len(input) + 10`` until the input is 6 long, then EOS (id 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.config = MoEConfig(vocab_size=64, max_position_embeddings=32)
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(ids.shape[0], ids.shape[1], 64)
        logits[:, -1, 0 if ids.shape[1] >= 6 else ids.shape[1] + 10] = 1.0
        return logits


def test_generate_stops_at_eos_and_budget(tokenizer):
    prompt_ids = tokenizer.encode("ab")
    expected = [n + 10 for n in range(len(prompt_ids), 6)]
    assert generate(_CountingLM(), tokenizer, "ab", max_new_tokens=50) == tokenizer.decode(expected)
    assert generate(_CountingLM(), tokenizer, "ab", max_new_tokens=1) == tokenizer.decode(expected[:1])


def test_generate_text_from_a_model_dir(tokenizer, tmp_path):
    config = MoEConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, intermediate_size=48,
                       num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                       max_position_embeddings=16, eos_token_id=0, initializer_range=0.5)
    torch.manual_seed(0)
    model = MoEForCausalLM(config).eval()
    save_moe(model, tmp_path)
    tokenizer.save(tmp_path)
    greedy = generate_text(tmp_path, "Ray is", max_new_tokens=20)
    assert greedy == generate(model, tokenizer, "Ray is", max_new_tokens=20)
    assert greedy == generate_text(tmp_path, "Ray is", max_new_tokens=20)
    sampled = {generate_text(tmp_path, "Ray is", max_new_tokens=20, temperature=1.0, seed=s) for s in range(3)}
    assert len(sampled) > 1  # seeds matter when sampling
    assert generate_text(tmp_path, "Ray is", 20, temperature=1.0, top_k=1, seed=5) == greedy  # top-1 = greedy


def test_stage_resolves_init_from_tokenizer_and_config(tokenizer, tmp_path):
    """Continuing from a checkpoint takes its tokenizer and its shape; the shape params are ignored."""
    from raypress.models.moe_checkpoint import to_hf_dict
    from raypress.operators.base import RunContext
    from raypress.operators.shared.moe_lm_trainer import MoELMTrainer as TrainMoELM, _model_config

    config = MoEConfig(vocab_size=tokenizer.vocab_size + 8, hidden_size=32, intermediate_size=48,
                       num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                       max_position_embeddings=64)
    save_moe(MoEForCausalLM(config), tmp_path / "ckpt")
    ctx = RunContext(run_dir=str(tmp_path), node_id="lm")
    no_tokenizer = TrainMoELM(TrainMoELM.Params(init_from=str(tmp_path / "ckpt"), hidden_size=256))
    with pytest.raises(ValueError, match="no tokenizer.json"):
        no_tokenizer._tokenizer(None, ctx)
    tokenizer.save(tmp_path / "ckpt")
    loaded, source = no_tokenizer._tokenizer(None, ctx)
    assert source == str(tmp_path / "ckpt") and loaded.vocab_size == tokenizer.vocab_size
    assert no_tokenizer._config(loaded) == config
    small = MoEConfig(**{**config.to_dict(), "vocab_size": 300})
    save_moe(MoEForCausalLM(small), tmp_path / "small")
    with pytest.raises(ValueError, match="tokenizer has"):
        TrainMoELM(TrainMoELM.Params(init_from=str(tmp_path / "small")))._config(loaded)
    shared = _model_config(TrainMoELM.Params(shared_expert_intermediate_size=64), tokenizer)
    assert (shared.architecture, shared.shared_expert_gate, shared.eos_token_id) == ("qwen2_moe", True, 0)
    assert to_hf_dict(shared)["model_type"] == "qwen2_moe"  # a config the checkpoint writer accepts
