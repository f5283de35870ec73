"""Algorithms behind one small interface: act, learn(batch) -> metrics, state_dict, clone."""

from evohpo.algos.base import Algorithm, Hyperparams
from evohpo.algos.matd3 import ALGOS, MATD3, Switches

__all__ = ["ALGOS", "MATD3", "Algorithm", "Hyperparams", "Switches"]
