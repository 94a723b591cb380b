"""What a token costs and how a routed run compares: the compute accounting, the metrics against a reference, the
dense reference."""
