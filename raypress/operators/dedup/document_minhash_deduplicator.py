"""``document_minhash_deduplicator``: Data-Juicer's MinHash-LSH near-dedup, global and deterministic.

Same parameters and defaults as Data-Juicer's op (tokenization, window, lowercase, ignore pattern,
permutations, Jaccard threshold, bands/rows chosen by ``optimal_param`` unless given).  Where it
differs, on purpose: Data-Juicer keeps the first document of a cluster in dataset order, which a
distributed dataset does not have, so each cluster keeps its smallest ``id``; an empty document
(no shingles) is never anyone's duplicate; ``verify`` can check candidates by exact Jaccard.
The distributed machinery is in ``minhash/`` (``deduplicator``: the driver, ``lsh``: bands, buckets,
verification) and ``graph.connected_components``.
"""

from __future__ import annotations

from raypress.operators.dedup.minhash.deduplicator import MinhashDeduplicator, MinhashParams
from raypress.operators.registry import register


@register("document_minhash_deduplicator")
class DocumentMinhashDeduplicator(MinhashDeduplicator[MinhashParams]):
    """Near-duplicate documents by MinHash-LSH (Jaccard of word/character shingles): each cluster
    keeps its smallest id; the others leave as duplicates naming it."""
