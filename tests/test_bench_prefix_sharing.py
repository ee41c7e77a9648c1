"""bench/prefix_sharing.py's child pass on random weights (--model-config, the GPU path, here on CPU): both variants
compute the same loss and gradient norm, and the shared one encodes and saves less. No timings are asserted."""

from __future__ import annotations

import pytest

from tests.helpers_scripts import load_script

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_random_weight_passes_agree_and_the_shared_one_keeps_less():
    bench = load_script("bench/prefix_sharing.py")
    unshared, shared = (bench.child("window", variant, 1, False, 4, model_config="tiny") for variant in
                        ("unshared", "shared"))
    assert shared["loss"] == pytest.approx(unshared["loss"], rel=1e-5)
    assert shared["grad_norm"] == pytest.approx(unshared["grad_norm"], rel=1e-4)
    assert shared["rows"] == unshared["rows"] == 4 and shared["tokens"] == unshared["tokens"]
    assert shared["tokens_encoded"] < unshared["tokens_encoded"] == unshared["tokens"]
    assert shared["saved_gb"] < unshared["saved_gb"]
