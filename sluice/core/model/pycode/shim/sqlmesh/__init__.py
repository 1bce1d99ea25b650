"""Sluice's stand-in for the parts of SQLMesh that macro and model files import."""

from .core.context import ExecutionContext
from .core.macros import SQL, MacroEvaluator, macro
from .core.model import model
from .core.model.kind import ModelKindName

__all__ = ["SQL", "ExecutionContext", "MacroEvaluator", "ModelKindName", "macro", "model"]
