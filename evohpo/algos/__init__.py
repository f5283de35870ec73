"""Algorithms behind one small interface (:class:`Algorithm`): act, learn(batch) -> metrics,
state_dict, clone. :mod:`evohpo.algos.registry` names and builds them."""

from evohpo.algos.base import Algorithm, Hyperparams
from evohpo.algos.matd3 import ALGOS, MATD3, Switches
from evohpo.algos.registry import (
    algo_names,
    build_algo,
    initial_hyperparams,
    restore_algo,
    switches,
)

__all__ = ["ALGOS", "MATD3", "Algorithm", "Hyperparams", "Switches", "algo_names", "build_algo",
           "initial_hyperparams", "restore_algo", "switches"]
