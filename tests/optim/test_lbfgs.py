"""optim.LBFGS against PyTorch's: the parameters after every step, the closure-call and iteration counts, the
returned loss, with and without the strong-Wolfe line search, on least squares, Rosenbrock functions and a small
net (float64, tight tolerance; float32 looser); state_dict round trips; PyTorch's errors."""
import numpy as np
import pytest

import tracejit as tj

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A, Y = RNG.standard_normal((8, 3)), RNG.standard_normal(8)


def rosen(lib, x):
    return ((1 - x[:-1]) ** 2 + 100 * (x[1:] - x[:-1] ** 2) ** 2).sum()


def lsq(lib, w):
    return ((lib.tensor(A).to(w.dtype) @ w - lib.tensor(Y).to(w.dtype)) ** 2).sum()


def _run(lib, f, x0, steps, dtype="float64", **kw):
    """The parameter after each of `steps` LBFGS steps, the losses step() returned, the optimizer."""
    x = lib.tensor(x0.astype(dtype), requires_grad=True)
    opt = lib.optim.LBFGS([x], **kw)

    def closure():
        opt.zero_grad()
        loss = f(lib, x)
        loss.backward()
        return loss
    xs, losses = [], []
    for _ in range(steps):
        losses.append(float(opt.step(closure)))
        xs.append(x.detach().numpy().copy())
    return np.array(xs), np.array(losses), opt


def _counts(opt):
    s = opt.state[opt.param_groups[0]["params"][0]]
    return s["func_evals"], s["n_iter"]


SETTINGS = [dict(max_iter=4), dict(max_iter=10, history_size=3), dict(lr=0.5, max_iter=7, max_eval=9),
            dict(lr=2.0, max_iter=6), dict(max_iter=20, tolerance_change=1e-12, tolerance_grad=1e-10),
            dict(max_iter=2, history_size=1)]
# Tolerances per problem: PyTorch's add_(alpha=t) fuses the multiply-add and its dot products sum in another order,
# so single steps differ in the last bit; least squares and the 4-d Rosenbrock keep that, while on the curved valleys
# of the 6-d and 2-d Rosenbrock functions the line search's bracketing and the iteration amplify it.
TOL = {"lsq": 1e-9, "rosen4": 1e-9, "rosen6": 1e-6, "rosen2": 1e-3}
PROBLEMS = [("lsq", lsq, np.zeros(3)), ("rosen6", rosen, np.linspace(-1, 1.5, 6)),
            ("rosen2", rosen, np.array([-1.5, 2.0])), ("rosen4", rosen, np.array([-1.2, 1.0, 0.5, -0.3]))]


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("kw", SETTINGS, ids=str)
@pytest.mark.parametrize("name, f, x0", PROBLEMS, ids=[p[0] for p in PROBLEMS])
def test_same_as_torch(name, f, x0, kw, line_search_fn):
    if name == "rosen6" and kw.get("lr") == 2.0 and line_search_fn is None:
        pytest.skip("diverges to 1e48 and NaN in both: last-bit differences are amplified without end")
    want, wl, ref = _run(torch, f, x0, 5, line_search_fn=line_search_fn, **kw)
    got, gl, opt = _run(tj, f, x0, 5, line_search_fn=line_search_fn, **kw)
    np.testing.assert_allclose(got, want, rtol=TOL[name], atol=TOL[name] / 100)
    np.testing.assert_allclose(gl, wl, rtol=TOL[name], atol=TOL[name] / 100)
    assert _counts(opt) == _counts(ref)
    np.testing.assert_allclose(got[:2], want[:2], rtol=1e-9, atol=1e-11)     # the first steps to the last bits


def test_the_line_search_changes_the_path():
    """With and without strong_wolfe the paths differ (so the comparison above checks both)."""
    a = _run(tj, rosen, np.array([-1.5, 2.0]), 3, max_iter=4)[0]
    b = _run(tj, rosen, np.array([-1.5, 2.0]), 3, max_iter=4, line_search_fn="strong_wolfe")[0]
    assert np.abs(a - b).max() > 1e-2


def test_converges_like_torch():
    want = _run(torch, rosen, np.array([-1.2, 1.0]), 4, max_iter=50, line_search_fn="strong_wolfe")
    got = _run(tj, rosen, np.array([-1.2, 1.0]), 4, max_iter=50, line_search_fn="strong_wolfe")
    np.testing.assert_allclose(got[0][-1], [1.0, 1.0], atol=1e-4)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-9, atol=1e-11)
    assert _counts(got[2]) == _counts(want[2])


def test_float32():
    want = _run(torch, lsq, np.zeros(3), 3, dtype="float32", max_iter=5, line_search_fn="strong_wolfe")
    got = _run(tj, lsq, np.zeros(3), 3, dtype="float32", max_iter=5, line_search_fn="strong_wolfe")
    assert got[0].dtype == np.float32
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_a_net_with_several_parameters(line_search_fn):
    """Flattening order over several parameters, one without a gradient (zeros), and the returned loss."""
    x, y = RNG.standard_normal((10, 3)), RNG.standard_normal((10, 2))
    res = []
    for lib in (torch, tj):
        lib.manual_seed(0)
        lin = lib.nn.Linear(3, 2).double()
        lin.load_state_dict({"weight": lib.tensor(np.arange(6.0).reshape(2, 3) / 10 - 0.2),
                             "bias": lib.tensor([0.1, -0.3])})
        unused = lib.nn.Parameter(lib.tensor([1.0, 2.0], dtype=lib.float64))
        opt = lib.optim.LBFGS(list(lin.parameters()) + [unused], max_iter=5, history_size=4,
                              line_search_fn=line_search_fn)
        xt, yt = lib.tensor(x), lib.tensor(y)

        def closure():
            opt.zero_grad()
            loss = ((lib.tanh(lin(xt)) - yt) ** 2).mean()
            loss.backward()
            return loss
        losses = [float(opt.step(closure)) for _ in range(4)]
        res.append((losses, [p.detach().numpy().copy() for p in lin.parameters()] + [unused.detach().numpy()]))
    (wl, wp), (gl, gp) = res
    np.testing.assert_allclose(gl, wl, rtol=1e-9)
    for a, b in zip(gp, wp):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(gp[-1], [1.0, 2.0])


def test_already_optimal_returns_at_once():
    x0 = np.linalg.lstsq(A, Y, rcond=None)[0]
    got, _, opt = _run(tj, lsq, x0, 2, tolerance_grad=1e-5)
    np.testing.assert_array_equal(got[-1], x0)
    assert _counts(opt) == (2, 0)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_state_dict_round_trip(line_search_fn):
    """Two steps, the state saved and loaded into a new optimizer of a copy: the next steps are the same."""
    kw = dict(max_iter=3, history_size=4, line_search_fn=line_search_fn)
    x = tj.tensor(np.array([-1.5, 2.0, 0.3]), requires_grad=True)
    opt = tj.optim.LBFGS([x], **kw)

    def closure_of(opt, x):
        def closure():
            opt.zero_grad()
            loss = rosen(tj, x)
            loss.backward()
            return loss
        return closure
    for _ in range(2):
        opt.step(closure_of(opt, x))
    sd = opt.state_dict()
    ref = torch.optim.LBFGS([torch.zeros(3, requires_grad=True)], **kw)
    t = ref.param_groups[0]["params"][0]

    def tclosure():
        ref.zero_grad()
        loss = rosen(torch, t)
        loss.backward()
        return loss
    ref.step(tclosure)
    ref.step(tclosure)
    assert set(sd["state"][0]) == set(ref.state_dict()["state"][0])
    assert sd["param_groups"][0].keys() == ref.state_dict()["param_groups"][0].keys()
    x2 = tj.tensor(x.detach().numpy().copy(), requires_grad=True)
    opt2 = tj.optim.LBFGS([x2], **kw)
    opt2.load_state_dict(sd)
    for _ in range(2):
        opt.step(closure_of(opt, x))
        opt2.step(closure_of(opt2, x2))
    np.testing.assert_array_equal(x2.detach().numpy(), x.detach().numpy())
    assert _counts(opt2) == _counts(opt)


def _error(make):
    with pytest.raises(Exception) as want:
        make(torch)
    with pytest.raises(type(want.value)) as got:
        make(tj)
    return str(got.value)


def test_errors():
    assert "learning rate" in _error(lambda lib: lib.optim.LBFGS([lib.zeros(2, requires_grad=True)], lr=-1.0))
    assert "parameter groups" in _error(lambda lib: lib.optim.LBFGS(
        [{"params": [lib.zeros(2, requires_grad=True)]}, {"params": [lib.zeros(2, requires_grad=True)]}]))

    def bad_search(lib):
        x = lib.ones(2, requires_grad=True)
        opt = lib.optim.LBFGS([x], line_search_fn="armijo")
        opt.step(lambda: (x ** 2).sum().backward() or (x ** 2).sum())
    assert "strong_wolfe" in _error(bad_search)

    def no_closure(lib):
        lib.optim.LBFGS([lib.zeros(2, requires_grad=True)]).step()
    _error(no_closure)
