"""A small chat model trained (in seconds) to answer given prompts with given texts, for the LLM ops.

Why: a random tiny model answers garbage, so it only ever tests the quarantine path.  Trained on
the exact chat prompts an op will send (rendered with the model's own chat template, as the server
renders them) and the answers wanted — in the op's Data-Juicer format for some rows, not for
others — greedy decoding on the server gives those answers back, and a test knows which rows
parse before it runs.  Training stops as soon as every wanted answer is the greedy one.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import torch

from moe_fixtures import tiny_config

Messages = list[dict[str, str]]
GIMP_PAGES = Path(__file__).resolve().parents[1] / "samples" / "web" / "gimp-help-en.jsonl.gz"


def gimp_rows(n: int = 10, chars: int = 160) -> list[dict[str, str]]:
    """``n`` question-answer rows on real text: the start of GIMP help pages (samples/web), asked
    what the page covers."""
    rows = []
    with gzip.open(GIMP_PAGES, "rt", encoding="utf-8") as f:
        for line in f:
            page = json.loads(line)
            title, _, body = page["text"].partition("\n")
            if not body or len(title) > 40 or any(r["title"] == title for r in rows):
                continue
            rows.append({"id": page["id"], "title": title, "text": body[:chars].rsplit(" ", 1)[0],
                         "query": f"What does the page {title} cover?", "response": f"It covers {title}."})
            if len(rows) == n:
                break
    return rows


def margin(logits: torch.Tensor, targets: torch.Tensor, wanted: torch.Tensor) -> float:
    """The smallest lead of a wanted token's logit over the best other token, at every wanted place."""
    picked = logits.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    others = logits.scatter(-1, targets.clamp(min=0).unsqueeze(-1), float("-inf")).max(-1).values
    return float((picked - others)[wanted].min().detach())


def train_chat_model(path: Path, examples: list[tuple[Messages, str]], *, seed: int = 0, max_steps: int = 600,
                     vocab_size: int = 1200, min_margin: float = 1.0) -> Path:
    """A model directory (weights, tokenizer with the ChatML template, manifest) whose greedy answer
    to each example's messages is the example's text, each token ahead of the next best by
    ``min_margin`` logits (the server's arithmetic differs a little); AssertionError when training
    falls short."""
    from raypress.artifacts import ModelArtifact
    from raypress.models.bpe_tokenizer import IM_END, train_bpe_tokenizer
    from raypress.models.moe import MoEForCausalLM
    from raypress.models.moe_checkpoint import save_moe

    corpus = []
    for messages, answer in examples:
        corpus += [json.dumps(messages, ensure_ascii=False), answer]
    tokenizer = train_bpe_tokenizer(corpus * 2, vocab_size=vocab_size)
    seqs = []
    for messages, answer in examples:
        prompt = tokenizer.encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True),
                                  add_special_tokens=False)
        seqs.append((prompt, tokenizer.encode(answer + IM_END, add_special_tokens=False)))
    length = max(len(p) + len(a) for p, a in seqs)
    ids = torch.zeros(len(seqs), length, dtype=torch.long)
    labels = torch.full((len(seqs), length), -100, dtype=torch.long)
    lengths = torch.tensor([len(p) + len(a) for p, a in seqs])
    for row, (prompt, answer) in enumerate(seqs):
        ids[row, : len(prompt) + len(answer)] = torch.tensor(prompt + answer)
        labels[row, len(prompt): len(prompt) + len(answer)] = torch.tensor(answer)
    config = tiny_config(tokenizer.vocab_size, tokenizer.eos_token_id, hidden_size=64, intermediate_size=96,
                         max_position_embeddings=max(256, 1 << (length + 64 - 1).bit_length()))
    torch.manual_seed(seed)
    model = MoEForCausalLM(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    targets = labels[:, 1:]
    wanted = targets != -100
    for step in range(max_steps):
        logits = model(ids, input_lengths=lengths)[:, :-1]
        if margin(logits, targets, wanted) > min_margin:
            break  # teacher-forced greedy = every wanted answer, clearly: what the server will decode
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                                 ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    else:
        raise AssertionError(f"the chat model did not learn its {len(seqs)} answers in {max_steps} steps")
    path.mkdir(parents=True, exist_ok=True)
    save_moe(model.eval(), path)
    tokenizer.model_max_length = config.max_position_embeddings
    tokenizer.save(path)
    ModelArtifact(str(path), config={"kind": "moe_lm", "architecture": config.architecture,
                                     "model": config.to_dict(), "trained_steps": step + 1}).save_manifest()
    return path
