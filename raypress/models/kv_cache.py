"""A slot-pool KV cache: one preallocated row of keys/values per live sequence.

Why a slot pool: continuous batching admits and retires sequences between decode steps, so the
cache must let a batch name *which* sequences it extends. Every sequence owns a slot (an index into
preallocated tensors ``k``/``v`` of shape ``(layers, slots, kv_heads, max_len, head_dim)``) and a
length. Heads before positions: a read of ``[0, kv_len)`` is then, per (slot, head), one contiguous
block that attention's matmuls take as it is (position-major, each decode step's attention read
keys with a head stride and ran about twice as slowly on CPU). A forward pass with ``slots=(B,)`` writes each row's new keys at its positions and reads
back ``[0, kv_len)`` of those slots; rows of different lengths are handled by a position mask
(key j is visible to a query at position p iff j <= p), so no padding is ever stored.

The invariant that makes this simple: a token's *position* is also its index in its slot.
Memory is ``2 * layers * slots * max_len * kv_heads * head_dim * itemsize`` bytes, all allocated up
front (``nbytes``), which is what the serving engine sizes its batch from. A paged design would
share memory between short and long sequences; at the sizes served here the pool is simpler, and
a batch whose slots lie in a short range (slots are handed out lowest first) reads that range as
a view (``read_span``); other batches gather their rows (``read``).
"""

from __future__ import annotations

import heapq

import torch

from raypress.models.moe_config import MoEConfig


class KVCache:
    """Preallocated keys/values for ``num_slots`` sequences of up to ``max_len`` tokens each."""

    def __init__(
        self,
        num_layers: int,
        num_slots: int,
        max_len: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        shape = (num_layers, num_slots, num_kv_heads, max_len, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = torch.zeros(num_slots, dtype=torch.long, device=device)
        self.max_len = max_len
        # lowest free slot first: the slots in use stay a compact range, which attention reads as a view
        self._free = list(range(num_slots))

    @classmethod
    def for_config(
        cls,
        config: MoEConfig,
        num_slots: int,
        max_len: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> "KVCache":
        return cls(
            config.num_hidden_layers,
            num_slots,
            max_len,
            config.num_key_value_heads,
            config.dim_per_head,
            dtype,
            device,
        )

    @property
    def num_slots(self) -> int:
        return self.k.shape[1]

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes

    def allocate(self) -> int:
        """Claim a free slot for a new sequence (its length starts at 0)."""
        if not self._free:
            raise RuntimeError(f"KV cache full: all {self.num_slots} slots are in use")
        slot = heapq.heappop(self._free)
        self.lengths[slot] = 0
        return slot

    def free(self, slot: int) -> None:
        """Give a finished sequence's slot back; its stale contents are never read again."""
        if slot in self._free or not 0 <= slot < self.num_slots:
            raise ValueError(f"slot {slot} is not allocated")
        self.lengths[slot] = 0
        heapq.heappush(self._free, slot)

    def write(
        self,
        layer: int,
        slots: torch.Tensor,
        positions: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        valid: torch.Tensor | None = None,
    ) -> None:
        """Store new keys/values ``(B, T, kv_heads, head_dim)`` at ``positions (B, T)`` of ``slots (B,)``.

        ``valid (B, T)`` marks real tokens; padding is not stored (it could lie past ``max_len``).
        """
        rows = slots[:, None].expand_as(positions)
        if valid is not None:
            rows, positions, k, v = rows[valid], positions[valid], k[valid], v[valid]
        # the slice between the two index tensors puts the indexed dimension first: (N, kv_heads, head_dim)
        self.k[layer, rows, :, positions] = k.to(self.k.dtype)
        self.v[layer, rows, :, positions] = v.to(self.v.dtype)

    def read(self, layer: int, slots: torch.Tensor, kv_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values ``(B, kv_heads, kv_len, head_dim)`` of ``slots``; the caller masks by position."""
        return self.k[layer, slots, :, :kv_len], self.v[layer, slots, :, :kv_len]

    def read_span(self, layer: int, lo: int, hi: int, kv_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Views (no copy) of the keys and values ``(hi - lo, kv_heads, kv_len, head_dim)`` of slots ``[lo, hi)``."""
        return self.k[layer, lo:hi, :, :kv_len], self.v[layer, lo:hi, :, :kv_len]
