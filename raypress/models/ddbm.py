"""The VE diffusion bridge of DDBM (Zhou et al., ICLR 2024), as BridgePure uses it.

Why a bridge and not a plain diffusion: BridgePure learns to map a *protected* image x_T back to
its clean x_0 from a few hundred (x_0, x_T) pairs. A diffusion bridge pinned at both ends,

    x_t = (t^2/T^2) x_T + (1 - t^2/T^2) x_0 + t sqrt(1 - t^2/T^2) eps,   t in [sigma_min, T],

starts sampling *at the protected image* instead of at pure noise, so the sampler only has to
undo the protection. The formulas follow github.com/alexzhou907/DDBM (``ddbm/karras_diffusion.py``,
``pred_mode='ve'``): ``get_bridge_scalings`` for the EDM-style preconditioning, loss weight
``1/c_out^2`` (DDBM's ``bridge_karras`` weighting, which equals it), ``c_noise = 250 log(t)``,
the Karras schedule ending in 0, and ``sample_heun`` with a stochastic "churn" Euler step and a
guided Heun step. Two deliberate differences, both from the BridgePure issue: training draws t
uniformly on [sigma_min, T], and BridgePure's optional pre-noise as its official code applies it,
``x_T <- sqrt(1 - beta) x_T + sqrt(beta) eps`` (paper beta in {0, 0.02}: ~0.14 std of noise on the
[-1, 1] scale), to the protected image in training and in sampling alike.

Everything here is plain torch on tensors shaped (B, C, H, W); nothing knows about Ray, so the
training/purify stages and the serving app share it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from raypress.models.config_dict import checked_fields, config_to_dict

Denoiser = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (x_t, sigma per sample) -> x0_hat

# DDBM's sampler starts just below T: at t = T exactly the guidance term (x_T - x)/(T^2 - t^2) is 0/0.
SAMPLER_T_OFFSET = 1e-4


def _bcast(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Per-sample values (B,) -> (B, 1, 1, 1) so they scale whole images."""
    return v.reshape(-1, *([1] * (like.ndim - 1))).to(like.dtype)


def _randn(like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    return torch.randn(like.shape, generator=generator, device=like.device, dtype=like.dtype)


def karras_schedule(
    steps: int, sigma_min: float, sigma_max: float, rho: float = 7.0, device: str | torch.device = "cpu"
) -> torch.Tensor:
    """``steps`` levels from sigma_max down to sigma_min, spaced evenly in sigma^(1/rho), then a 0.

    The trailing 0 is DDBM's (``append_zero``): it marks the last step, which is a plain Euler
    step onto the denoised image. Length ``steps + 1``.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    ramp = torch.linspace(0, 1, steps, dtype=torch.float64)
    min_inv, max_inv = sigma_min ** (1 / rho), sigma_max ** (1 / rho)
    sigmas = (max_inv + ramp * (min_inv - max_inv)) ** rho
    return torch.cat([sigmas, sigmas.new_zeros(1)]).to(device=device, dtype=torch.float32)


def ode_drift(
    x: torch.Tensor, sigma: float, denoised: torch.Tensor, x_T: torch.Tensor, sigma_max: float, guidance: float
) -> torch.Tensor:
    """dx/dt of DDBM's VE probability-flow ODE (``to_d``, deterministic branch).

    With g(t)^2 = 2t: d = -t * [ (x0_hat - x)/t^2 - w (x_T - x)/(T^2 - t^2) ]; the second term is
    the h-transform pulling toward x_T, scaled by the guidance w.
    """
    grad_x0 = (denoised - x) / sigma**2
    grad_xT = (x_T - x) / (sigma_max**2 - sigma**2)
    return -0.5 * (2 * sigma) * (grad_x0 - guidance * grad_xT)


def sde_drift(x: torch.Tensor, sigma: float, denoised: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(drift, g^2) of DDBM's reverse SDE used by the churn step (``to_d`` with stochastic=True).

    DDBM multiplies the h-transform term by 0 in this branch, so guidance does not enter here.
    """
    gt2 = 2 * sigma
    return -gt2 * (denoised - x) / sigma**2, gt2


def sampler_step(
    denoiser: Denoiser,
    x: torch.Tensor,
    x_T: torch.Tensor,
    sigma: float,
    sigma_next: float,
    *,
    sigma_max: float,
    churn_step_ratio: float,
    guidance: float,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, int]:
    """One iteration of DDBM's ``sample_heun`` (VE): optional churn step, then Heun (Euler if last).

    Returns (x at sigma_next, number of denoiser calls). Exposed so a test can check one step by
    hand and so a caller can trace the path.
    """
    ones = x.new_ones(x.shape[0])
    calls = 0
    if churn_step_ratio > 0:
        sigma_hat = (sigma_next - sigma) * churn_step_ratio + sigma
        d_1, gt2 = sde_drift(x, sigma, denoiser(x, sigma * ones))
        dt = sigma_hat - sigma
        x = x + d_1 * dt + _randn(x, generator) * abs(dt) ** 0.5 * gt2**0.5
        calls += 1
    else:
        sigma_hat = sigma

    d = ode_drift(x, sigma_hat, denoiser(x, sigma_hat * ones), x_T, sigma_max, guidance)
    calls += 1
    dt = sigma_next - sigma_hat
    if sigma_next == 0:
        return x + d * dt, calls
    x_2 = x + d * dt
    d_2 = ode_drift(x_2, sigma_next, denoiser(x_2, sigma_next * ones), x_T, sigma_max, guidance)
    return x + (d + d_2) / 2 * dt, calls + 1


def prenoise_mix(x_T: torch.Tensor, beta: float, noise: torch.Tensor) -> torch.Tensor:
    """BridgePure's official pre-noise, ``sqrt(1 - beta) x_T + sqrt(beta) noise`` (a variance-preserving
    mix); ``x_T`` itself when beta is 0.  The noise is given so callers keep their own generators."""
    if not 0 <= beta < 1:
        raise ValueError(f"pre-noise beta must lie in [0, 1), got {beta}")
    if beta == 0:
        return x_T
    return math.sqrt(1.0 - beta) * x_T + math.sqrt(beta) * noise


@dataclass(frozen=True)
class VEBridge:
    """The VE bridge's constants (DDBM defaults) and everything computed from them.

    ``beta_d`` is kept only so a DDBM-style config round-trips; the VE bridge does not use it.
    ``cov_xy`` is the assumed covariance of x_0 and x_T in the preconditioning (DDBM: 0 for
    uncorrelated ends). ``beta`` is BridgePure's pre-noise of the protected image.
    """

    sigma_min: float = 0.002
    sigma_max: float = 80.0
    sigma_data: float = 0.5
    cov_xy: float = 0.0
    beta_d: float = 2.0
    beta: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.sigma_min < self.sigma_max:
            raise ValueError(f"need 0 < sigma_min < sigma_max, got {self.sigma_min}, {self.sigma_max}")
        if self.sigma_data <= 0 or not 0 <= self.beta < 1:
            raise ValueError(f"need sigma_data > 0 and 0 <= beta < 1, got {self.sigma_data}, {self.beta}")

    def to_dict(self) -> dict[str, Any]:
        return config_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "VEBridge":
        return cls(**{k: float(v) for k, v in checked_fields(cls, data).items()})

    # --- the bridge -------------------------------------------------------------------------

    def marginal(self, x0: torch.Tensor, xT: torch.Tensor, t: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """A draw of x_t given both ends: mean (t^2/T^2) x_T + (1 - t^2/T^2) x_0, std t sqrt(1 - t^2/T^2)."""
        t = _bcast(t, x0)
        r = t**2 / self.sigma_max**2
        return r * xT + (1 - r) * x0 + t * torch.sqrt(1 - r) * noise

    def bridge_scalings(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(c_skip, c_out, c_in) of DDBM's ``get_bridge_scalings`` (VE, sigma_data_end = sigma_data).

        A = Var(x_t) under the data prior: r^2 sd_T^2 + (1-r)^2 sd^2 + 2 r (1-r) cov + t^2 (1-r), with
        r = t^2/T^2. c_in = A^-1/2 gives the network unit-variance input; c_skip and c_out make the
        network's regression target unit-variance too, and 1/c_out^2 is then the loss weight.
        """
        sd = sd_end = self.sigma_data
        r = t**2 / self.sigma_max**2
        a = r**2 * sd_end**2 + (1 - r) ** 2 * sd**2 + 2 * r * (1 - r) * self.cov_xy + t**2 * (1 - r)
        c_in = a.rsqrt()
        c_skip = ((1 - r) * sd**2 + r * self.cov_xy) / a
        c_out = (r**2 * (sd_end**2 * sd**2 - self.cov_xy**2) + sd**2 * t**2 * (1 - r)).sqrt() * c_in
        return c_skip, c_out, c_in

    @staticmethod
    def c_noise(t: torch.Tensor) -> torch.Tensor:
        """DDBM's time input to the network: 1000 * 0.25 * log(t) (log-scaled noise level)."""
        return 1000 * 0.25 * torch.log(t + 1e-44)

    def prenoise(self, xT: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """BridgePure's pre-noise (``prenoise_mix``): drowns the fine protection pattern before bridging."""
        return prenoise_mix(xT, self.beta, _randn(xT, generator)) if self.beta > 0 else xT

    def denoise(self, model: nn.Module, x_t: torch.Tensor, t: torch.Tensor, x_T: torch.Tensor) -> torch.Tensor:
        """x0_hat = c_skip x_t + c_out F(c_in x_t, c_noise(t), x_T), with t per sample (B,)."""
        c_skip, c_out, c_in = (_bcast(c, x_t) for c in self.bridge_scalings(t))
        return c_skip * x_t + c_out * model(c_in * x_t, self.c_noise(t), x_T)

    def sample_t(self, n: int, like: torch.Tensor, generator: torch.Generator | None = None,
                 log_share: float = 0.0) -> torch.Tensor:
        """Training times: U[sigma_min, T] (DDBM), with a ``log_share`` of them log-uniform instead.

        Why the option: uniform t puts 1.2% of the draws below t = 1, where the Karras schedule
        spends its last sampler steps; a small model trained briefly is then poor exactly there,
        and the churn steps' noise is not removed (stop 11: 9.8 dB with uniform t vs 18.2 dB with
        half the draws log-uniform, 5 steps, churn 0.33)."""
        u = torch.rand(n, generator=generator, device=like.device, dtype=like.dtype)
        t = self.sigma_min + u * (self.sigma_max - self.sigma_min)
        if log_share > 0:
            lo, hi = math.log(self.sigma_min), math.log(self.sigma_max)
            v = torch.rand(n, generator=generator, device=like.device, dtype=like.dtype)
            pick = torch.rand(n, generator=generator, device=like.device) < log_share
            t = torch.where(pick, torch.exp(lo + v * (hi - lo)), t)
        return t

    def training_loss(
        self, model: nn.Module, x0: torch.Tensor, xT: torch.Tensor, generator: torch.Generator | None = None,
        log_share: float = 0.0,
    ) -> torch.Tensor:
        """Mean over the batch of mean_pixels (1/c_out^2) (x0_hat - x0)^2, t from ``sample_t``
        (DDBM: all uniform on [sigma_min, T]).

        DDBM clips t to T; uniform draws never exceed it. The pre-noise (beta) is applied to x_T
        both as the bridge's end point and as the network's condition, as at sampling time.
        """
        xT = self.prenoise(xT, generator)
        t = self.sample_t(x0.shape[0], x0, generator, log_share)
        x_t = self.marginal(x0, xT, t, _randn(x0, generator))
        weight = _bcast(self.bridge_scalings(t)[1] ** -2, x0)
        return (weight * (self.denoise(model, x_t, t, xT) - x0) ** 2).mean()

    # --- sampling ---------------------------------------------------------------------------

    @torch.no_grad()
    def sample(
        self,
        model: nn.Module,
        x_T: torch.Tensor,
        steps: int = 40,
        churn_step_ratio: float = 0.33,
        guidance: float = 0.5,
        generator: torch.Generator | None = None,
        clip_denoised: bool = True,
    ) -> torch.Tensor:
        """x_T (protected) -> x_0 (purified) with DDBM's hybrid sampler; output clamped to [-1, 1].

        Schedule: Karras rho=7 from T - 1e-4 (as DDBM's ``karras_sample``) to sigma_min, then 0.
        Each step: a stochastic Euler step a fraction ``churn_step_ratio`` of the way to the next
        level, then a Heun step with guidance ``w``; the last step is Euler. The denoiser's
        x0 estimate is clamped to [-1, 1] when ``clip_denoised`` (DDBM's default). Put the model in
        eval mode first (dropout). NFE = steps * (2 + (churn > 0)) - 1.
        """
        if not 0 <= churn_step_ratio < 1:
            raise ValueError(f"churn_step_ratio must be in [0, 1), got {churn_step_ratio}")
        x_T = self.prenoise(x_T, generator)

        def denoiser(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
            x0_hat = self.denoise(model, x, sigma, x_T)
            return x0_hat.clamp(-1, 1) if clip_denoised else x0_hat

        sigmas = karras_schedule(steps, self.sigma_min, self.sigma_max - SAMPLER_T_OFFSET).tolist()
        x = x_T
        for sigma, sigma_next in zip(sigmas[:-1], sigmas[1:]):
            x, _ = sampler_step(
                denoiser, x, x_T, sigma, sigma_next, sigma_max=self.sigma_max,
                churn_step_ratio=churn_step_ratio, guidance=guidance, generator=generator,
            )
        return x.clamp(-1, 1)

    # --- the supervised one-step baseline ---------------------------------------------------

    def _at_T(self, x_T: torch.Tensor) -> torch.Tensor:
        return torch.full((x_T.shape[0],), self.sigma_max, device=x_T.device, dtype=x_T.dtype)

    def one_step_inverse_loss(self, model: nn.Module, x0: torch.Tensor, xT: torch.Tensor) -> torch.Tensor:
        """Plain MSE of the network's denoised output at (x_t = x_T, t = T) to x_0.

        Why: the paper's supervised baseline learns a direct inverse x_T -> x_0 with the same
        network; evaluating it at t = T through the same preconditioning keeps the comparison to
        the bridge about the bridge, not about the architecture. No pre-noise here.
        """
        return F.mse_loss(self.denoise(model, xT, self._at_T(xT), xT), x0)

    @torch.no_grad()
    def one_step_inverse(self, model: nn.Module, x_T: torch.Tensor) -> torch.Tensor:
        """The baseline's purified image: one network call at t = T, clamped to [-1, 1]."""
        return self.denoise(model, x_T, self._at_T(x_T), x_T).clamp(-1, 1)


def ema_model(model: nn.Module, decay: float = 0.999) -> AveragedModel:
    """An exponential moving average of ``model``'s weights (torch's AveragedModel, EMA update).

    Why EMA: diffusion models sample markedly better from averaged weights (DDBM keeps them too).
    Call ``.update_parameters(model)`` after each optimizer step (the first call copies the
    weights); sample from and save ``.module``.
    """
    if not 0 <= decay < 1:
        raise ValueError(f"decay must be in [0, 1), got {decay}")
    return AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)


def sampler_nfe(steps: int, churn_step_ratio: float) -> int:
    """Network evaluations of :meth:`VEBridge.sample` (for reports): the last step has no Heun corrector."""
    return steps * (2 + (churn_step_ratio > 0)) - 1


__all__ = [
    "VEBridge",
    "karras_schedule",
    "ode_drift",
    "sde_drift",
    "sampler_step",
    "ema_model",
    "sampler_nfe",
    "SAMPLER_T_OFFSET",
]
