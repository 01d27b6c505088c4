"""Random number generation: Generator objects over numpy's PCG64, and the global default generator.

Eager and traced code share these generators. A random op (rand, randn, randint, bernoulli, randperm,
multinomial: registry ops marked random) draws when it runs: eagerly at the call, in a traced program when the
compiled program runs, every call afresh, in program order. So from one seed a traced function gives the numbers its
eager run gives (dropout, distributions' sample and rsample, in-place fills alike). The rejection samplers of
tracejit.distributions.sampling (Gamma, and Beta, Dirichlet, Chi2, StudentT built on it; Poisson; Binomial) are the
exception: eagerly they stop proposing once every element has accepted, a traced program runs every round, so it
draws more numbers: its draws are fresh, reproducible from a seed and follow the same law, but differ from eager
mode's. The numbers differ from PyTorch's for the same seed (another generator)."""
import json

import numpy as np


class Generator:
    def __init__(self, device="cpu"):
        self.device = device
        self._seed = 67280421310721
        self._rng = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed):
        seed = int(seed)
        if seed < 0:
            seed &= 0xFFFFFFFFFFFFFFFF
        self._seed = seed
        self._rng = np.random.Generator(np.random.PCG64(seed))
        return self

    def seed(self):
        s = int(np.random.SeedSequence().entropy) & 0xFFFFFFFFFFFFFFFF
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._seed

    def get_state(self):
        from .creation import tensor
        from . import _dtype as D
        raw = json.dumps({"seed": self._seed, "state": self._rng.bit_generator.state}).encode()
        return tensor(list(raw), dtype=D.uint8)

    def set_state(self, state):
        try:
            d = json.loads(bytes(np.asarray(state._data, np.uint8)).decode())
            self._rng.bit_generator.state = d["state"]
            self._seed = d["seed"]
        except (ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"set_state: invalid RNG state tensor ({e})") from None
        return self


default_generator = Generator()


def manual_seed(seed):
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state):
    default_generator.set_state(new_state)


class fork_rng:
    """Context manager that restores the global RNG state on exit."""

    def __init__(self, devices=None, enabled=True):
        self.enabled = enabled

    def __enter__(self):
        if self.enabled:
            self._state = get_rng_state()

    def __exit__(self, *exc):
        if self.enabled:
            set_rng_state(self._state)
