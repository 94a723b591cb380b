"""Which tokens of a training block belong to an assistant reply: the lever that weights the distillation loss
towards the answers a user reads (``TrainConfig.answer_weight``).

The built-in chat data is a chat-formatted prompt followed by the dense model's own reply, documents joined by
EOS (hero_core.data.texts). A token is an answer token when an assistant header (the tokens the chat template appends
for ``add_generation_prompt``) precedes it inside the same block and no EOS or new turn came between. A block
that starts in the middle of a reply cannot see that reply's header, so those first tokens count as prompt: the
mask under-counts answers at block edges and never marks code or reasoning text (which has no header)."""

from __future__ import annotations

import torch


def assistant_header(tokenizer) -> list[int]:
    """The token ids the chat template puts before an assistant reply (empty without a chat template)."""
    if not getattr(tokenizer, "chat_template", None):
        return []
    turn = [{"role": "user", "content": "x"}]
    bare = tokenizer.apply_chat_template(turn, tokenize=True, add_generation_prompt=False)
    with_header = tokenizer.apply_chat_template(turn, tokenize=True, add_generation_prompt=True)
    bare, with_header = _ids(bare), _ids(with_header)
    if with_header[: len(bare)] != bare or len(with_header) == len(bare):
        return []  # a template that rewrites the turn instead of appending a header: no answer mask
    return with_header[len(bare):]


def _ids(encoded) -> list[int]:
    # apply_chat_template returns a list, or a BatchEncoding in newer transformers
    return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)


def turn_end_ids(tokenizer, header: list[int]) -> set[int]:
    """Tokens that end a reply: EOS (the document separator) and the header's first token (a new turn)."""
    ends = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    return ends | ({header[0]} if header else set())


def answer_mask(blocks: torch.Tensor, header: list[int], ends: set[int]) -> torch.Tensor:
    """(n, T) bool: True where the token sits inside an assistant reply whose header lies earlier in its block."""
    mask = torch.zeros(blocks.shape, dtype=torch.bool)
    if not header:
        return mask
    width = len(header)
    for row, ids in enumerate(blocks.tolist()):
        inside = False
        for t, token in enumerate(ids):
            if t >= width and ids[t - width: t] == header:
                inside = True
            if token in ends:
                inside = False
            mask[row, t] = inside
    return mask


def answer_weights(mask: torch.Tensor, weight: float) -> torch.Tensor:
    """Per-token loss weights: ``weight`` on answer tokens, 1 elsewhere."""
    return 1.0 + (weight - 1.0) * mask.float()
