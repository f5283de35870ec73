"""Algorithms behind one small interface: act, learn(batch) -> metrics, state_dict, clone."""

from evohpo.algos.matd3 import ALGOS, MATD3, Hyperparams, Switches

__all__ = ["ALGOS", "MATD3", "Hyperparams", "Switches"]
