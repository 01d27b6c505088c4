"""TraceError: what a static graph cannot capture, said at the user's line, with the ways out."""
import os
import sys


class TraceError(RuntimeError):
    pass


_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_frame():
    """file:line of the innermost frame outside tracejit (the user's code)."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_PKG + os.sep) and "importlib" not in fn:
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


def trace_error(what, fix=None):
    where = user_frame()
    fix = fix or ("mark the argument it depends on static (trace(fn, static_argnums=...)), or run that part "
                  "eagerly, outside the traced function")
    return TraceError(f"{where}: cannot trace {what}: inside @tracejit.trace tensors have no values yet, only "
                      f"shapes and dtypes, so Python cannot branch on them or read them.\nFix: {fix}.")


def value_dependent(what):
    return trace_error(f"{what}, which needs the tensor's value",
                       "mark the argument it depends on static (trace(fn, static_argnums=...)), use a tensor op "
                       "instead of Python control flow (torch.where, clamp, masking by multiplication), or run "
                       "that part eagerly, outside the traced function")
