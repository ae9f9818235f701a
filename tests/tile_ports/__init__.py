"""Real tile kernels (Triton tutorials, Liger-Kernel, cuTile samples, FlagGems) ported to
oxide.tile as a user would port them, from the docs only; each module holds its kernels and
a NumPy model. tests/test_tile_ports_*.py run them."""
