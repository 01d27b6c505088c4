"""The disk cache used for generated modules: tracejit.backends.diskcache if present, else the local fallback."""
try:
    from ..diskcache import load_module, cache_info, clear_cache, KernelCompileError  # noqa: F401
except ImportError:
    from .cache import load_module, cache_info, clear_cache, KernelCompileError  # noqa: F401
