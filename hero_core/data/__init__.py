"""The text and files the project reads and writes: the built-in training and evaluation text, your own corpus,
splits, blocks, stored prompts and experiment JSON."""
