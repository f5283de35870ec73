"""Algorithms behind one small interface (:class:`Algorithm`): act, learn(batch) -> metrics,
state_dict, clone. :mod:`evohpo.algos.registry` names and builds them."""

from evohpo.algos.base import Algorithm, Hyperparams
from evohpo.algos.matd3 import MATD3
from evohpo.algos.registry import (
    algo_names,
    build_algo,
    initial_hyperparams,
    restore_algo,
    switches,
)
from evohpo.algos.switches import ALGOS, Switches

__all__ = ["ALGOS", "MATD3", "Algorithm", "Hyperparams", "Switches", "algo_names", "build_algo",
           "initial_hyperparams", "restore_algo", "switches"]
