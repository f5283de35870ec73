"""Evolution: selection strategies, mutation operators, the search space and the population."""
