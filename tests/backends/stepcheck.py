"""A training-style step (forward + backward inside) run traced and eagerly from the same input."""
import numpy as np

import tracejit


def traced_equals_eager(step, x, tols):
    """Run `step` traced on x and eagerly on a copy of x; each output must agree within its (rtol, atol) in
    `tols`. Returns the compiled program's graph (the whole step is one program)."""
    tf = tracejit.trace(step)
    got = tf(x)
    x2 = x.detach().clone().requires_grad_()
    want = step(x2)
    for a, b, (rtol, atol) in zip(got, want, tols, strict=True):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=rtol, atol=atol)
    return tf.graph(x).entry.fwd_fn.graph
