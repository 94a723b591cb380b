"""Groups of traces as the analyses take them: ``{domain: [RoutingTrace, ...]}``, and pairs of runs of the
same tokens. The checks raise the message a notebook user needs instead of a shape error three calls later."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hero_core.method.trace import RoutingTrace

TracesByDomain = Mapping[str, Sequence[RoutingTrace]]


def check_domains(traces_by_domain: TracesByDomain) -> None:
    if not isinstance(traces_by_domain, Mapping) or not traces_by_domain:
        raise ValueError("pass a non-empty mapping {domain: [RoutingTrace, ...]}")
    for domain, traces in traces_by_domain.items():
        if isinstance(traces, RoutingTrace) or not all(isinstance(t, RoutingTrace) for t in traces):
            raise ValueError(f"domain {domain!r}: expected a list of RoutingTrace objects")


def domains_with_traces(traces_by_domain: TracesByDomain) -> list[tuple[str, Sequence[RoutingTrace]]]:
    """The checked mapping's (domain, traces) pairs, leaving out domains given no trace: the per-depth profiles
    read the routed layers off a domain's first trace, so an empty domain has no rows to give."""
    check_domains(traces_by_domain)
    return [(domain, traces) for domain, traces in traces_by_domain.items() if traces]


def check_same_tokens(trace_a: RoutingTrace, trace_b: RoutingTrace) -> None:
    if list(trace_a.token_ids) != list(trace_b.token_ids):
        raise ValueError("the two traces route different tokens: compare runs of the same prompt "
                         f"({trace_a.n_tokens} vs {trace_b.n_tokens} tokens)")
    if list(trace_a.routed_layers) != list(trace_b.routed_layers):
        raise ValueError("the two traces route different layers; compare runs of one backbone and layer set")
