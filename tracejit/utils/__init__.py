"""tracejit.utils: data loading (tracejit.utils.data)."""
from . import data
