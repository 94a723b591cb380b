"""Aggregations over routing traces: per-domain statistics, memory reads, spans, gate attributions."""
