"""What the router costs at one decode step, and whether torch.compile makes it cheaper. A probe, kept so its
numbers can be rerun: ``.venv/bin/python docs/experiments/router-compile/probe.py [--threads 2]``.

1. ``HeroRouter.decide`` for one token through every routed block of hero-25, module path against the packed
   inference path (median of 200 steps);
2. the packed decision of a block j >= 3 written as one function of tensors only (so one compiled graph serves
   every such block), timed eager and compiled (inductor, CPU) over blocks 3..R, with the one-off compile time
   and a check that both give the same gate;
3. whole decode steps at batch 1 (64-token prompt, 24 new tokens, median of 8 interleaved rounds after a
   warm-up): dense, the router with every FFN run (tau = 0), and the same with ``decide`` answering from a
   cache of real decisions, which leaves only the work around the decision (the FFN wrapper, the state
   hand-over): the router-only overhead split into the decision and the rest.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from hero_core import load_hero  # noqa: E402
from hero_core.method.call_state import RoutingCall  # noqa: E402
from hero_core.method.packed_router import packed_layers  # noqa: E402


def median_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return 1e3 * statistics.median(times)


def decide_every_block(router, hbars, packed: bool) -> None:
    path = router.new_path(1, "hero", device="cpu", dtype=torch.float32, packed=packed)
    for j, hbar in enumerate(hbars, start=1):
        executed = router.decide(j, hbar, path, "hero").gate >= 0.0  # tau = 0: every FFN runs
        executed.nonzero().numel()  # what the FFN wrapper does next


def packed_block(w, c, hbar, hbar_prev, delta_prev, dist_prev, p_prev, m_prev, keys, values, slot, decay_row,
                 path_bias):
    """The packed decision (packed_router.decide_packed) of one block j >= 3, with j only in tensors."""
    eps, dm = c.eps, c.d_memory
    delta = hbar - hbar_prev
    dist = torch.linalg.vector_norm(delta, dim=-1)
    gamma = torch.linalg.vecdot(delta, delta_prev) / (dist.clamp_min(eps) * dist_prev.clamp_min(eps))
    features = torch.stack([torch.log1p(dist), gamma, p_prev, m_prev], -1)
    inv_rms = torch.rsqrt(hbar.square().mean(-1, keepdim=True) + w.rms_eps)
    first = torch.addmm(w.first_bias, hbar * inv_rms, w.first_weight_t)
    act = F.silu(torch.cat([first, torch.addmm(path_bias, features, w.path_weight_t)], 1))
    state_local = torch.addmm(w.state_bias, act, w.state_weight_t)
    state, local = state_local[:, : c.d_state], state_local[:, c.d_state]
    qk, v_one, ns, history_in = torch.addmm(w.proj_bias, state, w.proj_weight_t).split(w.proj_split, 1)
    phi = F.elu(qk) + 1.0
    keys.index_copy_(1, slot, phi[:, dm:].unsqueeze(1))
    values.index_copy_(1, slot, v_one.unsqueeze(1))
    scores = torch.bmm(phi[:, :dm].unsqueeze(1), keys.transpose(1, 2)) * decay_row
    read = torch.bmm(scores, values).squeeze(1)
    context = read[:, :dm] / (read[:, dm : dm + 1] + eps)
    wc, history_c = (context @ w.context_weight_t).split((dm, c.head_hidden), 1)
    nu = 1.0 - torch.linalg.vecdot(ns, wc) / (torch.linalg.vector_norm(ns, dim=-1).clamp_min(eps)
                                              * torch.linalg.vector_norm(wc, dim=-1).clamp_min(eps))
    history_in = history_in + history_c + nu.unsqueeze(1) * w.novelty_weight
    final = torch.addmm(w.final_bias, F.silu(history_in), w.final_weight_t)
    return torch.sigmoid(final[:, 2] + local)


def block_inputs(w, c, j: int):
    n, d, R, dm = 1, c.d_model, c.n_routed, c.d_memory
    return (torch.randn(n, d), torch.randn(n, d), torch.randn(n, d), torch.rand(n) + 1, torch.rand(n), torch.rand(n),
            torch.rand(n, R, dm), torch.rand(n, R, dm + 1), torch.tensor([j - 1]), w.decay_rows[j - 1],
            w.path_bias[j - 1])


def decode_split(hero, reps: int = 8, new_tokens: int = 24) -> dict[str, float]:
    """ms per decode token: dense, router only (tau = 0), router only with cached decisions."""
    router = hero.router
    prompt = torch.randint(100, 2000, (1, 64), generator=torch.Generator().manual_seed(0))
    decide, cached = router.decide, {}

    def from_cache(j, hbar, path, variant):  # one token per step: replay block j's first real decision
        if hbar.shape[0] != 1:
            return decide(j, hbar, path, variant)
        if j not in cached:
            cached[j] = decide(j, hbar, path, variant)
        return cached[j]

    calls = {"dense": lambda: hero.new_call("dense", record=False),
             "router only": lambda: RoutingCall(router=router, variant="hero", tau=0.0, record=False),
             "router only, cached decisions": lambda: RoutingCall(router=router, variant="hero", tau=0.0,
                                                                  record=False)}
    times = {name: [] for name in calls}
    for rep in range(reps + 1):  # interleaved, so a slow moment of the machine hits every configuration
        for name, make_call in calls.items():
            router.decide = from_cache if "cached" in name else decide  # an instance attribute, removed below
            started = time.perf_counter()
            hero.decode(prompt, make_call(), new_tokens, stop_at_eos=False)
            if rep:  # the first round warms up
                times[name].append(1e3 * (time.perf_counter() - started) / new_tokens)
    out = {name: statistics.median(t) for name, t in times.items()}
    del router.decide
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    hero = load_hero("hero-25")
    router = hero.router
    c = router.config
    hbars = [torch.randn(1, c.d_model) for _ in range(c.n_routed)]
    with torch.no_grad():
        for packed in (False, True):
            for _ in range(20):
                decide_every_block(router, hbars, packed)
            ms = median_ms(lambda packed=packed: decide_every_block(router, hbars, packed), 200)
            print(f"{'packed' if packed else 'module'} path: {ms:.2f} ms per decode step of {c.n_routed} blocks")

        w = packed_layers(router, "hero")
        blocks = [block_inputs(w, c, j) for j in range(3, c.n_routed + 1)]
        eager = lambda *a: packed_block(w, c, *a)  # noqa: E731
        started = time.perf_counter()
        compiled = torch.compile(eager, dynamic=False, fullgraph=True)
        compiled(*blocks[0])
        print(f"torch.compile: {time.perf_counter() - started:.1f} s to compile")
        for name, fn in (("eager", eager), ("compiled", compiled)):
            for _ in range(10):
                [fn(*b) for b in blocks]
            ms = median_ms(lambda fn=fn: [fn(*b) for b in blocks], 50)
            print(f"{name}: {ms:.2f} ms for blocks 3..{c.n_routed}")
        clone = lambda b: tuple(x.clone() for x in b)  # noqa: E731  (the memory buffers are written in place)
        gap = (eager(*clone(blocks[3])) - compiled(*clone(blocks[3]))).abs().max().item()
        print(f"largest gate difference, eager vs compiled: {gap:.2e}")
        split = decode_split(hero)
        for name, ms in split.items():
            print(f"decode step, {name}: {ms:.1f} ms per token")
        dense = split["dense"]
        print(f"router-only overhead {split['router only'] / dense - 1:+.1%} of a dense step: the decision "
              f"{(split['router only'] - split['router only, cached decisions']) / dense:.1%}, the rest "
              f"{split['router only, cached decisions'] / dense - 1:+.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
