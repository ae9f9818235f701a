"""Kernels oxide ships, written in oxide: what the tile compiler launches for a pattern it
recognizes (the canonical matmul K loop on sm_90: `tile_matmul.py`), and what the
examples time."""
