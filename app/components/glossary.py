"""The glossary, in the sidebar of every page: the symbols and figures people trip on (docs/method.md)."""

from __future__ import annotations

import streamlit as st

from hero_core.method.checkpoint_info import NAME_CODES

TERMS = (
    ("block vs layer", "A *layer* L0…L29 is the backbone's decoder layer; a *routed block* j = 1…R counts only the "
                       "layers that have a router (all 30 here), in order. Maps label rows by layer."),
    ("g (gate)", "g = σ(a + b), per token and routed block. The FFN runs when g ≥ τ; otherwise a small adapter "
                 "stands in for it."),
    ("a, b", "a: the history logit (from the router's state, its memory read c and novelty ν); b: the local logit "
             "(from the post-attention hidden state alone). The `no_history` variant sets a = 0."),
    ("τ (tau)", "The threshold on g. Bundled checkpoints are trained at τ = 0.5, so the skip they realise in "
                "training is the skip at inference; moving τ is a what-if."),
    ("p_hist, m_hist", "p_hist = σ(a / 0.9), the history head's own vote; m_hist is its running product over depth."),
    ("ν (nu)", "Novelty: 1 − cos between the router state and what the memory read predicts (0 at the first block)."),
    ("ρ (rho)", "Per-block forgetting factor of the depth memory, σ(η_j); 0.98 at init. Older blocks' writes "
                "decay by ρ at every later write."),
    ("memory attention α", "The memory read is exactly a weighted mean of earlier blocks' values; α_{j,i} are the "
                           "weights. Uniform rows (1/(j−1)) mean the memory is read evenly, not selectively."),
    ("param skip", "The paper's metric: parameters of the FFNs a token skipped over all parameters, averaged over "
                   "tokens. One FFN of SmolLM2-135M is 1.97 % of its parameters."),
    ("net skip", "Param skip minus the adapters and router work actually done. It is negative when little is "
                 "skipped: the router itself costs parameters at every block."),
    ("FLOPs saved", "FLOPs not spent over a dense token's FLOPs (attention and LM head included), net of "
                    "adapter, router and memory work."),
    ("branch scaling", "`unscaled` (bundled checkpoints): an executed FFN adds FFN(u), a skipped one Adapter(u). "
                       "`paper`: g·FFN(u) or (1−g)·Adapter(u) — then 0 % skip is *not* the dense model, because "
                       "every FFN output is shrunk by g."),
    ("perplexity ratio", "Routed / dense perplexity on the same tokens (1 = unchanged). Below 1 on the chat "
                         "texts is an artefact, not a better model: the routers learned a sharpened copy of the "
                         "dense model's distribution, and the chat texts are the dense model's own replies."),
    ("checkpoint names", "  \n".join(f"`{code}`: {text}" for code, text in NAME_CODES)),
)


def render_glossary() -> None:
    with st.sidebar.expander("Glossary", icon=":material/menu_book:"):
        for term, text in TERMS:
            st.markdown(f"**{term}** — {text}")
