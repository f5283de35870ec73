"""The names ``evolution.strategy`` may take, in a module of its own so that the config can check
a name without importing the strategies (which import the config)."""

# the keys of evohpo.evolve.strategies.STRATEGIES, in its order
STRATEGY_NAMES = ("tournament", "truncation", "independent")
