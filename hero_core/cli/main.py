"""Command line: ``python -m hero_core trace|generate|… --help``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hero_core.method.config import INFERENCE_VARIANTS
from hero_core.method.model_args import add_backbone_arguments, load_from_args


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", default=None,
                   help="bundled name (default hero-10-r7; also hero-10-r4, hero-10, local-10, hero-25, local-25, "
                        "hero-40, local-40, no_memread-10, no_aux-10, no_pos-10, …) or a checkpoint directory")
    add_backbone_arguments(p)
    p.add_argument("--variant", default="hero", choices=INFERENCE_VARIANTS,
                   help="router variant at inference (dense: every FFN, routers bypassed)")
    p.add_argument("--tau", type=float, default=None, help="gate threshold (default: the checkpoint's, 0.5)")
    p.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    p.add_argument("--out", type=Path, default=None, help="write the trace as JSON here")


def _print_trace(trace, stream=sys.stdout) -> None:
    R = trace.n_routed
    per_token = trace.executed_per_token()
    print(f"{trace.backbone} · checkpoint {trace.checkpoint} · variant {trace.variant} · tau {trace.tau}", file=stream)
    for text in trace.notices:
        print(f"notice: {text}", file=stream)
    print(f"{'#':>4}  {'token':<20} FFNs run (of {R})", file=stream)
    for i, (token, n) in enumerate(zip(trace.tokens, per_token)):
        bar = "█" * int(n) + "·" * (R - int(n))
        print(f"{i:>4}  {json.dumps(token)[1:-1][:20]:<20} {int(n):>3}  {bar}", file=stream)
    s = trace.summary()
    print(f"param skip {100 * s['param_skip']:.2f} % · net {100 * s['net_param_skip']:.2f} % · "
          f"FLOPs saved {100 * s['flop_share_saved']:.2f} % · FFNs run per token {s['ffn_executed_per_token']:.2f}",
          file=stream)


def cmd_trace(args) -> int:
    hero = load_from_args(args)
    trace = hero.trace(args.prompt, variant=args.variant, tau=args.tau, chat_template=args.chat,
                       record_states=args.record_states)
    _print_trace(trace)
    if args.out:
        trace.save(args.out)
        print(f"trace written to {args.out}")
    return 0


def cmd_generate(args) -> int:
    hero = load_from_args(args)
    text, trace = hero.generate(args.prompt, max_new_tokens=args.max_new_tokens, variant=args.variant, tau=args.tau,
                                do_sample=args.sample, temperature=args.temperature, seed=args.seed,
                                chat_template=args.chat)
    print(text)
    s = trace.summary()
    print(f"\n[{trace.n_tokens} tokens routed · param skip {100 * s['param_skip']:.2f} %]", file=sys.stderr)
    if args.out:
        trace.save(args.out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    # allow_abbrev off everywhere: a prefix such as --data must never be taken for another flag (--data-blocks).
    parser = argparse.ArgumentParser(prog="python -m hero_core", description=__doc__, allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("trace", help="route a prompt and print/save its routing trace", allow_abbrev=False)
    p.add_argument("prompt", help="the text to route")
    p.add_argument("--record-states", action="store_true", help="also keep s_j, c_j and ||S|| in the trace")
    _add_model_args(p)
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("generate", help="routed generation with a trace over prompt + new tokens", allow_abbrev=False)
    p.add_argument("prompt", help="the text to continue")
    p.add_argument("--max-new-tokens", type=int, default=64, help="tokens to generate (default: %(default)s)")
    p.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature with --sample")
    p.add_argument("--seed", type=int, default=0, help="sampling seed with --sample")
    _add_model_args(p)
    p.set_defaults(func=cmd_generate)

    for name, module in (("train", "cli.train"), ("eval", "cli.evaluate"), ("bench", "bench.run"),
                         ("data", "data.texts"), ("frontier", "eval.frontier.curves"), ("sweep", "eval.sweep.run"),
                         ("study", "cli.study")):
        try:
            mod = __import__(f"hero_core.{module}", fromlist=["add_arguments"])
        except ModuleNotFoundError as err:
            if err.name != f"hero_core.{module}":
                raise
            continue
        p = sub.add_parser(name, help=mod.__doc__.strip().splitlines()[0] if mod.__doc__ else None,
                           description=mod.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                           allow_abbrev=False)
        mod.add_arguments(p)
        p.set_defaults(func=mod.run_cli)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:  # every user-facing error in hero_core is a ValueError subclass
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
