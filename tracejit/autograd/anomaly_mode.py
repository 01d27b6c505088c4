from .._state import STATE


class detect_anomaly:
    """Record each op's forward stack; a NaN produced in backward raises and names that forward op."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = STATE.anomaly
        STATE.anomaly = self.check_nan

    def __exit__(self, *exc):
        STATE.anomaly = self._prev
        return False


class set_detect_anomaly(detect_anomaly):
    def __init__(self, mode, check_nan=True):
        self._prev = STATE.anomaly
        STATE.anomaly = bool(mode) and check_nan

    def __enter__(self):
        pass


def is_anomaly_enabled():
    return STATE.anomaly
