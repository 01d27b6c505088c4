"""no_grad, enable_grad, set_grad_enabled, inference_mode: context managers and decorators."""
import functools

from .._state import STATE


class _Mode:
    _enabled = None

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self._enabled

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            with self.clone():
                return fn(*a, **k)
        return wrapper

    def clone(self):
        return type(self)()


class no_grad(_Mode):
    _enabled = False


class enable_grad(_Mode):
    _enabled = True


class set_grad_enabled(_Mode):
    """Works as a function (takes effect at once), a context manager and a decorator."""

    def __init__(self, mode):
        self._enabled = bool(mode)
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self._enabled

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False

    def clone(self):
        return _Fixed(self._enabled)


class _Fixed(_Mode):
    def __init__(self, mode):
        self._enabled = mode


class inference_mode(_Mode):
    def __init__(self, mode=True):
        self.mode = mode
        self._enabled = not mode

    def __enter__(self):
        self._prev_inf = STATE.inference
        STATE.inference = self.mode
        super().__enter__()

    def __exit__(self, *exc):
        STATE.inference = self._prev_inf
        return super().__exit__(*exc)

    def clone(self):
        return inference_mode(self.mode)


def is_grad_enabled():
    return STATE.grad_enabled


def is_inference_mode_enabled():
    return STATE.inference
