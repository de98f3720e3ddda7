"""BridgePure's VE diffusion bridge (DDBM), its sampler and its U-Net, pinned against hand math."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from raypress.models.bridge_unet import (
    KIND,
    BridgeUNet,
    BridgeUNetConfig,
    load_bridge,
    save_bridge,
)
from raypress.models.ddbm import (
    SAMPLER_T_OFFSET,
    VEBridge,
    ema_model,
    karras_schedule,
    sampler_nfe,
    sampler_step,
)

torch.set_num_threads(1)

T = 80.0
TINY = BridgeUNetConfig(base_channels=8, channel_mult=(1, 2), num_res_blocks=1, num_heads=2, norm_groups=4)


class FixedDenoiser:
    """A 'model' whose x0 estimate is always ``d``; records the sigmas it was asked about."""

    def __init__(self, d: torch.Tensor) -> None:
        self.d = d
        self.sigmas: list[float] = []

    def __call__(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        assert sigma.shape == (x.shape[0],)
        self.sigmas.append(float(sigma[0]))
        return self.d.expand_as(x)


class FixedBridge(VEBridge):
    """A bridge whose denoiser answers a fixed image: isolates the sampler loop from the network."""

    def __init__(self, d: torch.Tensor) -> None:
        super().__init__()
        object.__setattr__(self, "fixed", FixedDenoiser(d))

    def denoise(self, model, x_t, t, x_T):  # noqa: ANN001 - same signature as VEBridge.denoise
        return self.fixed(x_t, t)


def toy_pairs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Smooth 'clean' images and a fixed +-0.25 pattern added as the 'protection'."""
    g = torch.Generator().manual_seed(seed)
    x0 = (F.avg_pool2d(torch.rand(n, 1, 28, 28, generator=g) * 2 - 1, 5, 1, 2) * 2).clamp(-1, 1)
    pattern = torch.sign(torch.randn(1, 1, 28, 28, generator=g)) * 0.25
    return x0, (x0 + pattern).clamp(-1, 1)


# --- forward marginal -----------------------------------------------------------------------


def test_marginal_is_pinned_to_x0_at_sigma_min_and_to_xT_at_T() -> None:
    bridge = VEBridge()
    g = torch.Generator().manual_seed(0)
    x0, xT = torch.rand(4, 1, 28, 28, generator=g) * 2 - 1, torch.rand(4, 1, 28, 28, generator=g) * 2 - 1
    noise = torch.randn(4, 1, 28, 28, generator=g)
    near_0 = bridge.marginal(x0, xT, torch.full((4,), 0.002), noise)
    at_T = bridge.marginal(x0, xT, torch.full((4,), T), noise)
    # at sigma_min: std = 0.002 * sqrt(1 - 6.25e-10), mean weight on x_T 6.25e-10
    assert (near_0 - x0).abs().max() <= 0.002 * noise.abs().max() + 1e-6
    assert torch.allclose(at_T, xT, atol=1e-6)  # std 80 * sqrt(0) = 0


def test_marginal_mean_and_variance_at_middle_t_match_many_draws() -> None:
    bridge = VEBridge()
    g = torch.Generator().manual_seed(1)
    n, t = 200_000, 40.0
    x0, xT = torch.full((1, 1, 1, n), 0.6), torch.full((1, 1, 1, n), -0.2)
    x_t = bridge.marginal(x0, xT, torch.tensor([t]), torch.randn(1, 1, 1, n, generator=g))
    mean = (t**2 / T**2) * -0.2 + (1 - t**2 / T**2) * 0.6  # 0.25 * -0.2 + 0.75 * 0.6 = 0.4
    var = t**2 * (1 - t**2 / T**2)  # 1600 * 0.75 = 1200
    assert abs(x_t.mean().item() - mean) < 4 * math.sqrt(var / n)
    assert x_t.var().item() == pytest.approx(var, rel=0.02)


# --- preconditioning ------------------------------------------------------------------------


def test_bridge_scalings_match_hand_computed_ddbm_values() -> None:
    # DDBM get_bridge_scalings, VE, sigma_data = sigma_data_end = 0.5, c = 1, r = t^2 / T^2:
    #   A = r^2 sd^2 + (1-r)^2 sd^2 + 2 r (1-r) cov + t^2 (1-r);  c_in = A^-1/2
    #   c_skip = ((1-r) sd^2 + r cov) / A;  c_out = sqrt(r^2 (sd^4 - cov^2) + sd^2 t^2 (1-r)) c_in
    # t = 40, cov = 0: r = 0.25, A = 0.0625*0.25 + 0.5625*0.25 + 1600*0.75 = 1200.15625
    a = 1200.15625
    t40 = (0.1875 / a, math.sqrt(0.0625 * 0.0625 + 0.25 * 1600 * 0.75) / math.sqrt(a), 1 / math.sqrt(a))
    # t = 1, cov = 0: r = 1/6400, A = r^2*0.25 + (1-r)^2*0.25 + (1-r)
    r = 1 / 6400
    a1 = r * r * 0.25 + (1 - r) ** 2 * 0.25 + (1 - r)
    t1 = ((1 - r) * 0.25 / a1, math.sqrt(r * r * 0.0625 + 0.25 * (1 - r)) / math.sqrt(a1), 1 / math.sqrt(a1))
    # t = T: r = 1, A = sd^2 = 0.25 -> c_skip = 0, c_out = sqrt(0.0625)/0.5 = 0.5, c_in = 2
    tT = (0.0, 0.5, 2.0)
    c_skip, c_out, c_in = VEBridge().bridge_scalings(torch.tensor([40.0, 1.0, T], dtype=torch.float64))
    for i, want in enumerate([t40, t1, tT]):
        assert (c_skip[i].item(), c_out[i].item(), c_in[i].item()) == pytest.approx(want, rel=1e-9, abs=1e-12)

    # cov_xy = sd^2/2 = 0.125 ("C_skip = 1/2 at sigma_max" in DDBM's comment): at t = T, A = 0.25,
    # c_skip = 0.125/0.25 = 0.5, c_out = sqrt(0.0625 - 0.015625)/0.5
    c_skip, c_out, c_in = VEBridge(cov_xy=0.125).bridge_scalings(torch.tensor([T], dtype=torch.float64))
    assert (c_skip.item(), c_out.item(), c_in.item()) == pytest.approx((0.5, math.sqrt(0.046875) / 0.5, 2.0))


def test_scalings_give_unit_variance_input_and_target_for_gaussian_data() -> None:
    """What the preconditioning is for: with x_0, x_T ~ N(0, sd^2), Var(c_in x_t) = Var(target) = 1."""
    bridge, g, n = VEBridge(), torch.Generator().manual_seed(2), 100_000
    for t in (0.5, 5.0, 60.0):
        x0, xT = 0.5 * torch.randn(n, generator=g), 0.5 * torch.randn(n, generator=g)
        tt = torch.full((n,), t)
        x_t = bridge.marginal(x0, xT, tt, torch.randn(n, generator=g))
        c_skip, c_out, c_in = bridge.bridge_scalings(tt)
        assert (c_in * x_t).var().item() == pytest.approx(1.0, rel=0.03)
        assert ((x0 - c_skip * x_t) / c_out).var().item() == pytest.approx(1.0, rel=0.03)


def test_c_noise_is_ddbm_log_scaling() -> None:
    got = VEBridge.c_noise(torch.tensor([1.0, 80.0, 0.002], dtype=torch.float64))
    assert got.tolist() == pytest.approx([0.0, 250 * math.log(80.0), 250 * math.log(0.002)])


# --- schedule and sampler -------------------------------------------------------------------


def test_karras_schedule_runs_from_T_to_sigma_min_then_zero() -> None:
    s = karras_schedule(40, 0.002, T)
    assert len(s) == 41
    assert s[0].item() == pytest.approx(T) and s[39].item() == pytest.approx(0.002) and s[40].item() == 0.0
    assert bool((s[1:] < s[:-1]).all())
    mid = ((T ** (1 / 7) + 0.002 ** (1 / 7)) / 2) ** 7  # rho = 7, halfway in sigma^(1/7)
    assert karras_schedule(3, 0.002, T)[1].item() == pytest.approx(mid, rel=1e-6)


def test_first_step_churn_then_heun_matches_hand_computation() -> None:
    g = torch.Generator().manual_seed(3)
    x_T = torch.rand(2, 1, 4, 4, generator=g, dtype=torch.float64) * 2 - 1
    d = torch.rand(1, 1, 4, 4, generator=g, dtype=torch.float64) * 2 - 1
    s0, s1 = [v.item() for v in karras_schedule(40, 0.002, T - SAMPLER_T_OFFSET)[:2]]
    s, w = 0.33, 0.5
    denoiser = FixedDenoiser(d)
    got, calls = sampler_step(
        denoiser, x_T, x_T, s0, s1, sigma_max=T, churn_step_ratio=s, guidance=w,
        generator=torch.Generator().manual_seed(11),
    )
    z = torch.randn(x_T.shape, generator=torch.Generator().manual_seed(11), dtype=torch.float64)

    # churn: SDE Euler from s0 to s_hat with drift -2 (D - x)/s0 and diffusion sqrt(2 s0)
    s_hat = s0 + s * (s1 - s0)
    x1 = x_T + (-2 * (d - x_T) / s0) * (s_hat - s0) + z * math.sqrt(s0 - s_hat) * math.sqrt(2 * s0)
    # Heun with guidance: d(x, t) = -t [ (D - x)/t^2 - w (x_T - x)/(T^2 - t^2) ]
    d1 = -s_hat * ((d - x1) / s_hat**2 - w * (x_T - x1) / (T**2 - s_hat**2))
    x2 = x1 + d1 * (s1 - s_hat)
    d2 = -s1 * ((d - x2) / s1**2 - w * (x_T - x2) / (T**2 - s1**2))
    want = x1 + (d1 + d2) / 2 * (s1 - s_hat)

    assert calls == 3
    assert denoiser.sigmas == pytest.approx([s0, s_hat, s1])
    assert torch.allclose(got, want, rtol=1e-10, atol=1e-10)


def test_last_step_is_churn_then_euler_onto_the_denoised_image() -> None:
    g = torch.Generator().manual_seed(4)
    x = torch.rand(2, 1, 4, 4, generator=g, dtype=torch.float64)
    x_T = torch.rand(2, 1, 4, 4, generator=g, dtype=torch.float64)
    d = torch.rand(1, 1, 4, 4, generator=g, dtype=torch.float64)
    s0, s, w = 0.002, 0.33, 0.5
    denoiser = FixedDenoiser(d)
    got, calls = sampler_step(
        denoiser, x, x_T, s0, 0.0, sigma_max=T, churn_step_ratio=s, guidance=w,
        generator=torch.Generator().manual_seed(5),
    )
    z = torch.randn(x.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    s_hat = s0 * (1 - s)
    x1 = x + (-2 * (d - x) / s0) * (s_hat - s0) + z * math.sqrt(s0 - s_hat) * math.sqrt(2 * s0)
    d1 = -s_hat * ((d - x1) / s_hat**2 - w * (x_T - x1) / (T**2 - s_hat**2))
    want = x1 + d1 * (0.0 - s_hat)  # Euler: = D - w s_hat^2 (x_T - x1) / (T^2 - s_hat^2)

    assert calls == 2 and denoiser.sigmas == pytest.approx([s0, s_hat])
    assert torch.allclose(got, want, rtol=1e-10, atol=1e-12)
    assert torch.allclose(got, d.expand_as(x), atol=1e-9)


def test_sample_with_a_fixed_denoiser_lands_on_it_and_counts_nfe() -> None:
    g = torch.Generator().manual_seed(6)
    d = torch.rand(1, 1, 8, 8, generator=g) * 1.6 - 0.8
    x_T = torch.rand(3, 1, 8, 8, generator=g) * 2 - 1
    bridge = FixedBridge(d)
    out = bridge.sample(torch.nn.Identity(), x_T, steps=6, churn_step_ratio=0.33, guidance=0.5,
                        generator=torch.Generator().manual_seed(0))
    assert torch.allclose(out, d.expand_as(x_T), atol=1e-4)
    assert len(bridge.fixed.sigmas) == sampler_nfe(6, 0.33) == 17
    assert bridge.fixed.sigmas[0] == pytest.approx(T - SAMPLER_T_OFFSET)


def test_prenoise_is_bridgepures_variance_preserving_mix_only_when_beta_is_set() -> None:
    """The official code: sqrt(1 - beta) x + sqrt(beta) eps (not x + beta eps)."""
    x = torch.full((1, 1, 200, 200), 0.5)
    assert VEBridge().prenoise(x) is x
    noisy = VEBridge(beta=0.02).prenoise(x, torch.Generator().manual_seed(0))
    eps = torch.randn(x.shape, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(noisy, math.sqrt(0.98) * x + math.sqrt(0.02) * eps)
    assert (noisy - math.sqrt(0.98) * x).std().item() == pytest.approx(math.sqrt(0.02), rel=0.05)
    with pytest.raises(ValueError, match="beta"):
        VEBridge(beta=1.0)


# --- network, training, checkpoints ---------------------------------------------------------


def test_unet_forward_shape_and_zero_initial_output() -> None:
    model = BridgeUNet(TINY)
    x = torch.randn(3, 1, 28, 28)
    out = model(x, VEBridge.c_noise(torch.tensor([0.01, 1.0, 79.0])), torch.randn(3, 1, 28, 28))
    assert out.shape == (3, 1, 28, 28)
    assert torch.count_nonzero(out) == 0  # zero-initialised output conv: denoised starts as c_skip x_t
    with pytest.raises(ValueError, match="divisible"):
        BridgeUNetConfig(channel_mult=(1, 2, 2, 2))  # 28 is not divisible by 8


def test_patch_size_folds_pixels_into_channels_and_back() -> None:
    cfg = BridgeUNetConfig(base_channels=8, channel_mult=(1, 2), num_res_blocks=1, attention=False,
                           norm_groups=4, patch_size=2)
    model = BridgeUNet(cfg)
    assert model.input_conv.in_channels == 2 * 4 and model.out_conv.out_channels == 4
    torch.nn.init.normal_(model.out_conv.weight)  # non-zero output, to see where each pixel lands
    x, x_T = torch.randn(2, 1, 28, 28), torch.randn(2, 1, 28, 28)
    c = VEBridge.c_noise(torch.tensor([0.5, 5.0]))
    out = model(x, c, x_T)
    assert out.shape == (2, 1, 28, 28)
    # the network's output cells unfold back to pixels in pixel_shuffle order
    inner = model.out_conv(torch.nn.functional.silu(model.out_norm(torch.zeros(1, 8, 14, 14))))
    assert torch.equal(torch.nn.functional.pixel_shuffle(inner, 2)[0, 0, 0:2, 0:2].flatten(), inner[0, :, 0, 0])
    with pytest.raises(ValueError, match="patch_size 3 must be >= 1 and divide image_size 28"):
        BridgeUNetConfig(patch_size=3)
    with pytest.raises(ValueError, match="28 / patch_size 2 = 14 must be divisible by 2\\*\\*2"):
        BridgeUNetConfig(patch_size=2, channel_mult=(1, 2, 2), norm_groups=8)
    assert BridgeUNetConfig.from_dict({"base_channels": 8, "norm_groups": 4}).patch_size == 1  # older configs


def test_training_lowers_the_bridge_loss_on_sixteen_pairs() -> None:
    torch.manual_seed(0)
    model = BridgeUNet(BridgeUNetConfig(base_channels=4, channel_mult=(1, 2), num_res_blocks=1,
                                        attention=False, norm_groups=2))  # small: the CPU is shared
    bridge, (x0, xT) = VEBridge(), toy_pairs(16, seed=0)

    def held_loss() -> float:  # same t and noise draws every time, so before/after compare
        with torch.no_grad():
            return bridge.training_loss(model, x0.repeat(2, 1, 1, 1), xT.repeat(2, 1, 1, 1),
                                        torch.Generator().manual_seed(123)).item()

    before = held_loss()
    opt, g = torch.optim.Adam(model.parameters(), lr=3e-3), torch.Generator().manual_seed(1)
    for _ in range(30):
        loss = bridge.training_loss(model, x0, xT, g)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert held_loss() < 0.6 * before


def test_one_step_inverse_loss_is_mse_of_the_output_at_T() -> None:
    x0, xT = toy_pairs(4, seed=1)
    model = BridgeUNet(TINY)  # untrained: F = 0, so x0_hat = c_skip(T) x_T
    assert VEBridge().one_step_inverse_loss(model, x0, xT).item() == pytest.approx((x0**2).mean().item())
    # cov_xy = 0.125 -> c_skip(T) = 0.5
    got = VEBridge(cov_xy=0.125).one_step_inverse_loss(model, x0, xT).item()
    assert got == pytest.approx(((0.5 * xT - x0) ** 2).mean().item(), rel=1e-5)
    assert torch.count_nonzero(VEBridge().one_step_inverse(model, xT)) == 0


def test_ema_follows_torch_averaged_model_semantics() -> None:
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema = ema_model(model, decay=0.9)
    ema.update_parameters(model)  # first update copies
    with torch.no_grad():
        model.weight.fill_(3.0)
    ema.update_parameters(model)
    assert ema.module.weight.flatten().tolist() == pytest.approx([0.9 * 1.0 + 0.1 * 3.0] * 2)


def test_save_load_round_trip(tmp_path) -> None:  # noqa: ANN001 - pytest fixture
    torch.manual_seed(0)
    model = BridgeUNet(TINY)
    with torch.no_grad():  # non-zero output layer so the comparison means something
        model.out_conv.weight.normal_()
    bridge = VEBridge(beta=0.02, cov_xy=0.125)
    save_bridge(model, {"bridge": bridge.to_dict(), "steps": 40}, tmp_path / "m")
    loaded, config = load_bridge(tmp_path / "m")
    assert config["kind"] == KIND and config["steps"] == 40
    assert BridgeUNetConfig.from_dict(config["unet"]) == TINY
    assert VEBridge.from_dict(config["bridge"]) == bridge
    x, c, xT = torch.randn(2, 1, 28, 28), torch.tensor([1.0, 2.0]), torch.randn(2, 1, 28, 28)
    model.eval()
    assert torch.equal(loaded(x, c, xT), model(x, c, xT))
    assert not loaded.training


def test_loading_a_model_of_another_kind_is_refused(tmp_path) -> None:  # noqa: ANN001
    (tmp_path / "config.json").write_text(json.dumps({"kind": "ngram_classifier"}))
    with pytest.raises(ValueError, match="ngram_classifier.*bridgepure_ddbm"):
        load_bridge(tmp_path)
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_bridge(tmp_path / "missing")
    with pytest.raises(ValueError, match="reserved"):
        save_bridge(BridgeUNet(TINY), {"kind": "other"}, tmp_path / "x")


def test_training_times_are_uniform_by_default_and_partly_log_uniform_on_request() -> None:
    bridge = VEBridge()
    like = torch.zeros(1)
    uniform = bridge.sample_t(20000, like, torch.Generator().manual_seed(0))
    mixed = bridge.sample_t(20000, like, torch.Generator().manual_seed(0), log_share=0.5)
    for t in (uniform, mixed):
        assert bridge.sigma_min <= float(t.min()) and float(t.max()) <= bridge.sigma_max
    # P(t < 1): uniform (1 - 0.002) / 79.998 = 1.25%; half log-uniform adds 0.5 * ln(500) / ln(40000) = 29.4%
    assert float((uniform < 1).float().mean()) == pytest.approx(0.0125, abs=0.003)
    assert float((mixed < 1).float().mean()) == pytest.approx(0.5 * 0.0125 + 0.5 * math.log(500) / math.log(40000),
                                                              abs=0.01)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)  # the default path draws as before
    u = torch.rand(5, generator=g1)
    assert torch.allclose(bridge.sample_t(5, like, g2), bridge.sigma_min + u * (bridge.sigma_max - bridge.sigma_min))
