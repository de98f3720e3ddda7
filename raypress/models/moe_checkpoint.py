"""Hugging Face checkpoints (``config.json`` + ``*.safetensors``) of Mixtral and Qwen2-MoE <-> our model.

Why a mapping and not ``transformers``: serving and training load weights without importing it, and
our layout differs on purpose (q/k/v fused into ``qkv_proj``; experts stacked as ``w13 (E, 2I, H)``
and ``w2 (E, H, I)`` for the fused-MoE kernels; the shared expert's gate/up fused). Loading reads
the per-expert HF layout (``experts.{e}.w1/w3/w2`` for Mixtral, ``experts.{e}.gate_proj/up_proj/
down_proj`` for Qwen2-MoE) and also the stacked ``experts.gate_up_proj/down_proj`` that
transformers 5 keeps in memory; sharded checkpoints (``model.safetensors.index.json``) load shard
by shard through ``safe_open``. Saving writes the per-expert layout that ``save_pretrained``
writes, so ``AutoModelForCausalLM.from_pretrained`` (transformers 4 or 5) loads it.

Configs the model cannot reproduce exactly (dense layers between MoE layers, per-layer sliding
windows, scaled RoPE, other activations, quantized weights) are refused with a ValueError rather
than loaded approximately.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from raypress.models.moe import MoEForCausalLM
from raypress.models.moe_config import MoEConfig

ARCHITECTURES = {"mixtral": "MixtralForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM"}
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
DEFAULT_SHARD_BYTES = 5 * 2**30

# HF's class defaults for keys a config.json may omit.
_HF_DEFAULTS: dict[str, dict[str, Any]] = {
    "mixtral": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "max_position_embeddings": 4096 * 32,
        "rms_norm_eps": 1e-5,
        "rope_theta": 1e6,
        "router_aux_loss_coef": 0.001,
    },
    "qwen2_moe": {
        "vocab_size": 151936,
        "hidden_size": 2048,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "router_aux_loss_coef": 0.001,
    },
}


def from_hf_dict(hf: dict[str, Any]) -> MoEConfig:
    """Our config from a Mixtral or Qwen2-MoE ``config.json`` (transformers 4 or 5 spelling)."""
    arch = hf.get("model_type")
    if arch not in ARCHITECTURES:
        raise ValueError(f"model_type {arch!r} is not supported (expected one of {sorted(ARCHITECTURES)})")
    get = {**_HF_DEFAULTS[arch], **{k: v for k, v in hf.items() if v is not None}}.get
    if get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {get('hidden_act')!r} is not supported (SwiGLU experts use silu)")
    if hf.get("quantization_config"):
        raise ValueError("quantized checkpoints are not supported")
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default":
        raise ValueError(f"rope type {rope_type!r} is not supported (only unscaled RoPE)")
    common = dict(
        architecture=arch,
        vocab_size=get("vocab_size"),
        hidden_size=get("hidden_size"),
        num_hidden_layers=get("num_hidden_layers"),
        num_attention_heads=get("num_attention_heads"),
        num_key_value_heads=get("num_key_value_heads", get("num_attention_heads")),
        head_dim=get("head_dim"),
        num_experts_per_tok=get("num_experts_per_tok"),
        rope_theta=float(rope.get("rope_theta", get("rope_theta"))),
        rms_norm_eps=get("rms_norm_eps"),
        max_position_embeddings=get("max_position_embeddings"),
        tie_word_embeddings=bool(get("tie_word_embeddings", False)),
        router_aux_loss_coef=get("router_aux_loss_coef"),
        initializer_range=get("initializer_range", 0.02),
        bos_token_id=_first_id(hf.get("bos_token_id")),
        eos_token_id=_first_id(hf.get("eos_token_id")),
    )
    if arch == "mixtral":
        return MoEConfig(
            **common,
            intermediate_size=get("intermediate_size"),
            num_local_experts=get("num_local_experts"),
            norm_topk_prob=True,
            sliding_window=get("sliding_window"),
        )
    if get("decoder_sparse_step", 1) != 1 or get("mlp_only_layers", []):
        raise ValueError("Qwen2-MoE with dense MLP layers (decoder_sparse_step > 1, mlp_only_layers) is not supported")
    if get("use_sliding_window", False):
        raise ValueError("Qwen2-MoE per-layer sliding windows are not supported")
    return MoEConfig(
        **common,
        intermediate_size=get("moe_intermediate_size"),
        num_local_experts=get("num_experts"),
        norm_topk_prob=bool(get("norm_topk_prob", False)),
        shared_expert_intermediate_size=get("shared_expert_intermediate_size"),
        shared_expert_gate=True,
        attention_bias=bool(get("qkv_bias", True)),
    )


def _first_id(value: int | list[int] | None) -> int | None:
    """HF allows a list of ids (several stop tokens); our config keeps the first."""
    if isinstance(value, list):
        return value[0] if value else None
    return value


def to_hf_dict(config: MoEConfig, dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """The ``config.json`` for ``config.architecture``; refuses what that architecture cannot express."""
    arch = config.architecture
    if arch not in ARCHITECTURES:
        raise ValueError(f"architecture {arch!r} is not supported (expected one of {sorted(ARCHITECTURES)})")
    dtype_name = str(dtype).removeprefix("torch.")
    hf: dict[str, Any] = {
        "architectures": [ARCHITECTURES[arch]],
        "model_type": arch,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "hidden_act": "silu",
        "num_experts_per_tok": config.num_experts_per_tok,
        "max_position_embeddings": config.max_position_embeddings,
        "rms_norm_eps": config.rms_norm_eps,
        "rope_theta": config.rope_theta,  # transformers 4 spelling
        "rope_parameters": {"rope_type": "default", "rope_theta": config.rope_theta},  # transformers 5
        "tie_word_embeddings": config.tie_word_embeddings,
        "router_aux_loss_coef": config.router_aux_loss_coef,
        "initializer_range": config.initializer_range,
        "attention_dropout": 0.0,
        "bos_token_id": config.bos_token_id,
        "eos_token_id": config.eos_token_id,
        "use_cache": True,
        "dtype": dtype_name,
        "torch_dtype": dtype_name,
    }
    if config.head_dim is not None:  # absent, not null: Qwen2-MoE reads it with getattr(..., default)
        hf["head_dim"] = config.head_dim
    if arch == "mixtral":
        if config.shared_expert_intermediate_size > 0:
            raise ValueError("Mixtral has no shared expert: save this model with architecture='qwen2_moe'")
        if config.attention_bias:
            raise ValueError("Mixtral has no attention biases: save this model with architecture='qwen2_moe'")
        if not config.norm_topk_prob:
            raise ValueError("Mixtral always renormalises the top-k weights (norm_topk_prob=True)")
        hf.update(
            intermediate_size=config.intermediate_size,
            num_local_experts=config.num_local_experts,
            sliding_window=config.sliding_window,
            router_jitter_noise=0.0,
        )
        return hf
    if config.shared_expert_intermediate_size <= 0 or not config.shared_expert_gate:
        raise ValueError("Qwen2-MoE always has a sigmoid-gated shared expert")
    if config.sliding_window is not None:
        raise ValueError("Qwen2-MoE cannot express one sliding window for all layers")
    hf.update(
        intermediate_size=config.shared_expert_intermediate_size,  # dense-MLP width; unused without dense layers
        moe_intermediate_size=config.intermediate_size,
        shared_expert_intermediate_size=config.shared_expert_intermediate_size,
        num_experts=config.num_local_experts,
        norm_topk_prob=config.norm_topk_prob,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        qkv_bias=True,  # biases are always written (zeros when the model has none), as transformers 4 expects
        use_sliding_window=False,
        sliding_window=None,
        max_window_layers=config.num_hidden_layers,
    )
    return hf


# ---------------------------------------------------------------------------------------------
# weights


def _moe_prefixes(arch: str, layer: int) -> list[str]:
    """Where a layer's MoE block lives in HF names (Mixtral 4.x-style first, then transformers 5 style)."""
    base = f"model.layers.{layer}"
    return [f"{base}.block_sparse_moe", f"{base}.mlp"] if arch == "mixtral" else [f"{base}.mlp"]


def _expert_names(arch: str) -> tuple[str, str, str]:
    """(gate, up, down) projection names of one HF expert."""
    return ("w1", "w3", "w2") if arch == "mixtral" else ("gate_proj", "up_proj", "down_proj")


def hf_to_ours(config: MoEConfig, keys: set[str], get: Callable[[str], torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our state dict from HF tensor names ``keys`` (read one at a time through ``get``).

    Raises if a tensor our model needs is missing or if the checkpoint holds tensors we would ignore.
    """
    used: set[str] = set()

    def take(name: str) -> torch.Tensor:
        if name not in keys:
            raise KeyError(f"checkpoint lacks tensor {name!r}")
        used.add(name)
        return get(name)

    ours: dict[str, torch.Tensor] = {
        "embed_tokens.weight": take("model.embed_tokens.weight"),
        "norm.weight": take("model.norm.weight"),
    }
    if config.tie_word_embeddings:
        used.add("lm_head.weight")  # a redundant copy some checkpoints keep
    else:
        ours["lm_head.weight"] = take("lm_head.weight")
    gate_name, up_name, down_name = _expert_names(config.architecture)
    for i in range(config.num_hidden_layers):
        hf_layer, layer = f"model.layers.{i}", f"layers.{i}"
        ours[f"{layer}.input_norm.weight"] = take(f"{hf_layer}.input_layernorm.weight")
        ours[f"{layer}.post_attn_norm.weight"] = take(f"{hf_layer}.post_attention_layernorm.weight")
        attn = f"{hf_layer}.self_attn"
        ours[f"{layer}.attn.qkv_proj.weight"] = torch.cat([take(f"{attn}.{p}_proj.weight") for p in "qkv"])
        if config.attention_bias:
            ours[f"{layer}.attn.qkv_proj.bias"] = torch.cat([take(f"{attn}.{p}_proj.bias") for p in "qkv"])
        ours[f"{layer}.attn.o_proj.weight"] = take(f"{attn}.o_proj.weight")
        moe = next((p for p in _moe_prefixes(config.architecture, i) if f"{p}.gate.weight" in keys), None)
        if moe is None:
            raise KeyError(f"checkpoint lacks the router of layer {i}")
        ours[f"{layer}.moe.router.weight"] = take(f"{moe}.gate.weight")
        if f"{moe}.experts.gate_up_proj" in keys:  # stacked, as transformers 5 holds it in memory
            ours[f"{layer}.moe.w13"] = take(f"{moe}.experts.gate_up_proj")
            ours[f"{layer}.moe.w2"] = take(f"{moe}.experts.down_proj")
        else:
            expert = [f"{moe}.experts.{e}" for e in range(config.num_local_experts)]
            ours[f"{layer}.moe.w13"] = torch.stack(
                [torch.cat([take(f"{x}.{gate_name}.weight"), take(f"{x}.{up_name}.weight")]) for x in expert]
            )
            ours[f"{layer}.moe.w2"] = torch.stack([take(f"{x}.{down_name}.weight") for x in expert])
        if config.shared_expert_intermediate_size > 0:
            shared = f"{moe}.shared_expert"
            ours[f"{layer}.moe.shared_expert.gate_up.weight"] = torch.cat(
                [take(f"{shared}.gate_proj.weight"), take(f"{shared}.up_proj.weight")]
            )
            ours[f"{layer}.moe.shared_expert.down.weight"] = take(f"{shared}.down_proj.weight")
            if config.shared_expert_gate:
                ours[f"{layer}.moe.shared_expert_gate.weight"] = take(f"{moe}.shared_expert_gate.weight")
    unused = sorted(k for k in keys - used if not k.endswith("rotary_emb.inv_freq"))
    if unused:
        raise ValueError(f"checkpoint holds {len(unused)} tensors this model would ignore, e.g. {unused[:3]}")
    return ours


def ours_to_hf(config: MoEConfig, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """HF tensors (per-expert layout, as ``save_pretrained`` writes) from our state dict."""
    hf: dict[str, torch.Tensor] = {
        "model.embed_tokens.weight": state["embed_tokens.weight"],
        "model.norm.weight": state["norm.weight"],
    }
    if not config.tie_word_embeddings:
        hf["lm_head.weight"] = state["lm_head.weight"]
    gate_name, up_name, down_name = _expert_names(config.architecture)
    heads, kv_heads, head_dim = config.num_attention_heads, config.num_key_value_heads, config.dim_per_head
    qkv_sizes = [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim]
    inter = config.intermediate_size
    for i in range(config.num_hidden_layers):
        hf_layer, layer = f"model.layers.{i}", f"layers.{i}"
        hf[f"{hf_layer}.input_layernorm.weight"] = state[f"{layer}.input_norm.weight"]
        hf[f"{hf_layer}.post_attention_layernorm.weight"] = state[f"{layer}.post_attn_norm.weight"]
        attn = f"{hf_layer}.self_attn"
        qkv = state[f"{layer}.attn.qkv_proj.weight"]
        bias = state.get(f"{layer}.attn.qkv_proj.bias")
        if bias is None and config.architecture == "qwen2_moe":
            bias = qkv.new_zeros(qkv.shape[0])
        for name, weight in zip("qkv", qkv.split(qkv_sizes)):
            hf[f"{attn}.{name}_proj.weight"] = weight
        if bias is not None:
            for name, b in zip("qkv", bias.split(qkv_sizes)):
                hf[f"{attn}.{name}_proj.bias"] = b
        hf[f"{attn}.o_proj.weight"] = state[f"{layer}.attn.o_proj.weight"]
        moe = _moe_prefixes(config.architecture, i)[0]
        hf[f"{moe}.gate.weight"] = state[f"{layer}.moe.router.weight"]
        w13, w2 = state[f"{layer}.moe.w13"], state[f"{layer}.moe.w2"]
        for e in range(config.num_local_experts):
            hf[f"{moe}.experts.{e}.{gate_name}.weight"] = w13[e, :inter]
            hf[f"{moe}.experts.{e}.{up_name}.weight"] = w13[e, inter:]
            hf[f"{moe}.experts.{e}.{down_name}.weight"] = w2[e]
        if config.shared_expert_intermediate_size > 0:
            shared = f"{moe}.shared_expert"
            gate_up = state[f"{layer}.moe.shared_expert.gate_up.weight"]
            gate, up = gate_up.split(config.shared_expert_intermediate_size)
            hf[f"{shared}.gate_proj.weight"], hf[f"{shared}.up_proj.weight"] = gate, up
            hf[f"{shared}.down_proj.weight"] = state[f"{layer}.moe.shared_expert.down.weight"]
            hf[f"{moe}.shared_expert_gate.weight"] = state[f"{layer}.moe.shared_expert_gate.weight"]
    return hf


# ---------------------------------------------------------------------------------------------
# files


def _tensor_files(path: Path) -> list[Path]:
    index = path / INDEX_FILE
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        return [path / name for name in sorted(set(weight_map.values()))]
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {path}")
    return files


def load_moe(
    path: str | Path, dtype: torch.dtype | None = None, device: torch.device | str = "cpu"
) -> tuple[MoEForCausalLM, MoEConfig]:
    """Load an HF Mixtral / Qwen2-MoE checkpoint directory (or one saved by ``save_moe``).

    dtype: None keeps the checkpoint's dtype (that of its embedding). The model comes back in eval mode.
    """
    path = Path(path)
    config = from_hf_dict(json.loads((path / "config.json").read_text()))
    handles = [safe_open(str(f), framework="pt", device="cpu") for f in _tensor_files(path)]
    where = {key: handle for handle in handles for key in handle.keys()}
    if dtype is None:
        dtype = where["model.embed_tokens.weight"].get_tensor("model.embed_tokens.weight").dtype

    def get(name: str) -> torch.Tensor:
        return where[name].get_tensor(name).to(device=device, dtype=dtype)

    state = hf_to_ours(config, set(where), get)
    with torch.device("meta"):
        model = MoEForCausalLM(config)
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval(), config


def save_moe(model: MoEForCausalLM, path: str | Path, max_shard_bytes: int = DEFAULT_SHARD_BYTES) -> None:
    """Write ``config.json`` and safetensors in the HF layout of ``model.config.architecture``.

    More than ``max_shard_bytes`` of tensors are split into ``model-0000i-of-0000n.safetensors``
    shards with a ``model.safetensors.index.json``, as ``save_pretrained`` does.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    config = model.config
    dtype = model.embed_tokens.weight.dtype
    hf_config = to_hf_dict(config, dtype)
    hf_state = ours_to_hf(config, model.state_dict())
    tensors = {name: t.detach().to("cpu").contiguous().clone() for name, t in hf_state.items()}
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in tensors.items():
        if shards[-1] and size + tensor.nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += tensor.nbytes
    for stale in [*path.glob("*.safetensors"), path / INDEX_FILE]:
        stale.unlink(missing_ok=True)
    metadata = {"format": "pt"}
    if len(shards) == 1:
        save_file(shards[0], str(path / SINGLE_FILE), metadata=metadata)
    else:
        weight_map = {}
        for n, shard in enumerate(shards, start=1):
            name = f"model-{n:05d}-of-{len(shards):05d}.safetensors"
            save_file(shard, str(path / name), metadata=metadata)
            weight_map.update({key: name for key in shard})
        total = sum(t.nbytes for t in tensors.values())
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (path / INDEX_FILE).write_text(json.dumps(index, indent=2))
    (path / "config.json").write_text(json.dumps(hf_config, indent=2))
