"""evohpo: evolutionary hyperparameter optimisation of multi-agent RL while it trains."""

__version__ = "0.1.0"
