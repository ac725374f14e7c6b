"""backbones."""
