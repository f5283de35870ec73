"""The training loop: collect a window, score, make the next generation, place, log, checkpoint."""
