import os

import numpy as np
import pytest

import tracejit

# pytest-xdist (`-n auto`, as README and .ci/run run the suite). tests/ops must run in one process, in collection
# order: tests/ops/test_ops_vs_torch.py::test_meta_checked_for_every_op asserts that the tests before it called
# every op (tests/ops/conftest.py checks each op's shape rule on those calls). xdist's own way to keep tests
# together, --dist loadgroup, silently stops grouping with pytest 9.2 (pytest-dev/pytest-xdist#1386), so for
# --dist load (what -n picks by default) the controller schedules with OpsInOneWorker: tests/ops is one unit of
# work (sent to one worker in collection order; it takes a few seconds), every other test is handed out on its
# own. An explicitly chosen other --dist mode is xdist's own.
OPS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops")
OPS_UNIT = "tracejit:tests/ops"


def _ops_prefix(config):
    return os.path.relpath(OPS_DIR, str(config.rootpath)).replace(os.sep, "/") + "/"


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling
    prefix = _ops_prefix(config)

    class OpsInOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return OPS_UNIT if nodeid.startswith(prefix) else nodeid

    return OpsInOneWorker(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    # tells the workers (config.workerinput) whether tests/ops runs in one of them
    node.workerinput["tracejit_ops_in_one_worker"] = node.config.getvalue("dist") == "load"


def pytest_configure(config):
    """TRACEJIT_TEST_KERNEL_CACHE=DIR: one kernel cache for every session, whatever folder a test points
    TRACEJIT_CACHE_DIR at (mutation runs: a kernel a mutant does not change loads from disk instead of compiling;
    test_row_fusion.py 77 -> 3 s a mutant)."""
    fixed = os.environ.get("TRACEJIT_TEST_KERNEL_CACHE")
    if fixed:
        from tracejit.backends import diskcache
        diskcache.cache_root = lambda: fixed


@pytest.fixture(autouse=True)
def _seed():
    tracejit.manual_seed(0)
    np.random.seed(0)
    yield
