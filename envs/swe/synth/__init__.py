"""SWE tasks synthesized from real Python packages, validated in the sandbox (issue 42).

    turngym swe synth cachetools==5.3.3 toolz==0.12.1 --out runs/synth      # or a local directory

A package's own test suite, run twice in the sandbox, picks the stable tests; SWE-smith's procedural
modifiers (libcst) put bugs in the functions those tests run; a bug is kept when some of them fail, the
same way twice; each becomes an SWE-bench record with a problem statement written from the failing
tests' output (no LLM), validated through the world's own grading path. Splits hold whole repositories out
(:mod:`.manifest`); the manifest regenerates the set anywhere; :mod:`.world` loads it (``turngym/SWE-synth-v0``).
See :mod:`.pipeline` and docs/worlds/swe.md, "Task sets at scale".
"""

from turngym.envs.swe.synth.manifest import Manifest, SplitRule
from turngym.envs.swe.synth.pipeline import PackageReport, SynthConfig, synthesize, synthesize_package
from turngym.envs.swe.synth.source import SourceError, cache_root

__all__ = ["Manifest", "PackageReport", "SourceError", "SplitRule", "SynthConfig", "cache_root", "synthesize",
           "synthesize_package"]
