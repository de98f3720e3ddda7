"""HF checkpoint parity: tiny random Mixtral / Qwen2-MoE from transformers <-> our model, logits within 1e-4."""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from raypress.models.moe import MoEForCausalLM  # noqa: E402
from raypress.models.moe_checkpoint import from_hf_dict, hf_to_ours, load_moe, save_moe, to_hf_dict  # noqa: E402
from raypress.models.moe_config import MoEConfig  # noqa: E402

TOL = 1e-4
TINY = dict(
    vocab_size=128,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_experts_per_tok=2,
    initializer_range=0.1,  # large enough that routing and logits differ visibly between tokens
)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny tensors gain nothing from threads, and on a shared machine OpenMP spinning costs seconds."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _mixtral(**extra):
    config = transformers.MixtralConfig(
        **TINY,
        intermediate_size=96,
        num_local_experts=4,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        **extra,
    )
    torch.manual_seed(0)
    return transformers.MixtralForCausalLM(config).eval()


def _qwen2_moe():
    config = transformers.Qwen2MoeConfig(
        **TINY,
        intermediate_size=96,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=48,
        num_experts=4,
        decoder_sparse_step=1,
        mlp_only_layers=[],
    )
    torch.manual_seed(1)
    return transformers.Qwen2MoeForCausalLM(config).eval()


def _ids(batch: int = 2, length: int = 11) -> torch.Tensor:
    return torch.randint(0, 128, (batch, length), generator=torch.Generator().manual_seed(3))


def _assert_round_trip(hf_model, tmp_path, max_shard_bytes: int = 5 * 2**30):
    """HF -> ours -> HF: logits and the training loss (LM + coef * aux) agree at every hop."""
    ids = _ids()
    hf_model.save_pretrained(tmp_path / "hf")
    ours, config = load_moe(tmp_path / "hf")
    with torch.no_grad():
        hf_logits = hf_model(ids).logits
        our_logits = ours(ids)
    assert (our_logits - hf_logits).abs().max().item() < TOL
    assert hf_logits.std() > 0.1  # the comparison is between non-trivial outputs

    hf_out = hf_model(ids, labels=ids, output_router_logits=True)
    our_loss = ours(ids, labels=ids)
    assert our_loss.item() == pytest.approx(hf_out.loss.item(), abs=TOL)
    assert ours.last_aux_loss.item() == pytest.approx(hf_out.aux_loss.item(), abs=TOL)

    save_moe(ours, tmp_path / "ours", max_shard_bytes=max_shard_bytes)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ours").eval()
    assert type(reloaded) is type(hf_model)
    ours_again, config_again = load_moe(tmp_path / "ours")
    with torch.no_grad():
        assert (reloaded(ids).logits - our_logits).abs().max().item() < TOL
        assert (ours_again(ids) - our_logits).abs().max().item() < 1e-6
    assert config_again == config
    again = ours_again.state_dict()
    assert all(torch.equal(again[name], tensor) for name, tensor in ours.state_dict().items())
    return config


def test_mixtral_parity_both_ways(tmp_path):
    config = _assert_round_trip(_mixtral(), tmp_path)
    assert config.architecture == "mixtral" and config.norm_topk_prob
    assert (config.num_local_experts, config.intermediate_size, config.rope_theta) == (4, 96, 10000.0)


def test_qwen2_moe_parity_both_ways_with_sharded_save(tmp_path):
    config = _assert_round_trip(_qwen2_moe(), tmp_path, max_shard_bytes=60_000)
    assert config.architecture == "qwen2_moe" and not config.norm_topk_prob
    assert (config.intermediate_size, config.shared_expert_intermediate_size) == (32, 48)
    assert config.attention_bias
    index = json.loads((tmp_path / "ours" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1


def test_mixtral_with_sliding_window_and_tied_embeddings(tmp_path):
    hf_model = _mixtral(sliding_window=4, tie_word_embeddings=True)
    ids = _ids(1, 10)
    hf_model.save_pretrained(tmp_path)
    ours, config = load_moe(tmp_path)
    assert config.sliding_window == 4 and config.tie_word_embeddings and ours.lm_head is None
    with torch.no_grad():
        assert (ours(ids) - hf_model(ids).logits).abs().max().item() < TOL


def test_stacked_expert_layout_of_transformers_5_loads_too():
    """transformers 5 holds experts stacked (``mlp.experts.gate_up_proj``); that layout maps as well."""
    hf_model = _mixtral()
    state = hf_model.state_dict()
    assert "model.layers.0.mlp.experts.gate_up_proj" in state
    config = from_hf_dict(hf_model.config.to_dict())
    ours = MoEForCausalLM(config).eval()
    ours.load_state_dict(hf_to_ours(config, set(state), state.__getitem__))
    ids = _ids()
    with torch.no_grad():
        assert (ours(ids) - hf_model(ids).logits).abs().max().item() < TOL


def test_transformers_4_config_spelling():
    legacy = {
        "model_type": "qwen2_moe",
        "vocab_size": 100,
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 64,
        "rope_theta": 1234.0,
        "rope_scaling": None,
        "eos_token_id": [7, 8],
    }
    config = from_hf_dict(legacy)
    assert (config.rope_theta, config.num_local_experts, config.eos_token_id) == (1234.0, 8, 7)
    assert config.attention_bias and config.shared_expert_gate and config.rms_norm_eps == 1e-6


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_type": "llama"}, "not supported"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope type"),
        ({"decoder_sparse_step": 2}, "dense MLP"),
        ({"mlp_only_layers": [0]}, "dense MLP"),
        ({"hidden_act": "gelu"}, "hidden_act"),
    ],
)
def test_configs_we_cannot_reproduce_are_refused(change, message):
    base = {"model_type": "qwen2_moe", "num_hidden_layers": 2}
    with pytest.raises(ValueError, match=message):
        from_hf_dict({**base, **change})


def test_saving_refuses_what_the_architecture_cannot_express():
    with pytest.raises(ValueError, match="shared expert"):
        to_hf_dict(MoEConfig(shared_expert_intermediate_size=8, shared_expert_gate=True))
    with pytest.raises(ValueError, match="renormalises"):
        to_hf_dict(MoEConfig(norm_topk_prob=False))
    with pytest.raises(ValueError, match="shared expert"):
        to_hf_dict(MoEConfig(architecture="qwen2_moe"))
    qwen = MoEConfig(architecture="qwen2_moe", shared_expert_intermediate_size=8, shared_expert_gate=True)
    hf = to_hf_dict(qwen, torch.bfloat16)
    assert (hf["model_type"], hf["moe_intermediate_size"], hf["dtype"]) == ("qwen2_moe", 14336, "bfloat16")


def test_qwen2_moe_without_attention_bias_saves_zero_biases(tmp_path):
    """Our model may lack q/k/v biases; Qwen2-MoE files always carry them, so zeros keep logits equal."""
    config = MoEConfig(
        **{k: v for k, v in TINY.items() if k != "initializer_range"},
        intermediate_size=16,
        num_local_experts=4,
        architecture="qwen2_moe",
        norm_topk_prob=False,
        shared_expert_intermediate_size=24,
        shared_expert_gate=True,
        initializer_range=0.1,
    )
    torch.manual_seed(4)
    ours = MoEForCausalLM(config).eval()
    save_moe(ours, tmp_path)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    ids = _ids()
    with torch.no_grad():
        assert (reloaded(ids).logits - ours(ids)).abs().max().item() < TOL
    assert torch.count_nonzero(reloaded.model.layers[0].self_attn.q_proj.bias) == 0
