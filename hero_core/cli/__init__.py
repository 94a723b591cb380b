"""Every command line: ``python -m hero_core trace|generate|train|eval|study|…`` (main), and the model options they
share."""
