"""What a run writes as it goes: console, JSONL and Weights & Biases."""
