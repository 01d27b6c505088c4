"""tracejit.utils: data loading (tracejit.utils.data), checkpoint."""
from . import checkpoint, data
