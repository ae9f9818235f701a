"""Shared test setup: `@pytest.mark.gpu` tests skip themselves where no CUDA GPU is found."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    from oxide.runtime.device import cuda_device_count

    if cuda_device_count() > 0:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (none found)")
    for item in gpu_items:
        item.add_marker(skip)
