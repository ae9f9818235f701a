"""The Tile-model differential fuzzer (tools/tile_fuzz.py): generator, NumPy model, runner."""
