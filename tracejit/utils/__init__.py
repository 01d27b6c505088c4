"""tracejit.utils: data loading (tracejit.utils.data), checkpoint, _pytree."""
from . import _pytree, checkpoint, data
